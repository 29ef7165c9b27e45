//! Human-facing forms of a probe result: the text table and the SVG plot.

use crate::ProbeResult;
use stats::{bytes, ns};
use std::fmt::Write as _;

/// Measured values beside the documented ones, as a text table.
pub fn table(r: &ProbeResult) -> String {
    let mut s = String::new();
    let doc = |d: Option<u64>| d.map_or("-".to_string(), bytes);
    let _ = writeln!(s, "{} (probed in {:.1} s)", r.cpu_model, r.duration_s);
    if r.was_busy() {
        let _ = writeln!(
            s,
            "warning: load average {:.1} on {} CPUs while probing: other work shared the caches, so the \
             effective sizes below are smaller and noisier than on an idle machine; `tdg probe --force` when idle",
            r.load_average.unwrap_or(0.0),
            r.cpus
        );
    }
    let _ = writeln!(
        s,
        "\n{:<24} {:>12} {:>12} {:>10}",
        "cache", "effective", "documented", "latency"
    );
    for c in &r.caches {
        let dev = match c.documented_bytes {
            Some(d) if d > 0 => format!(
                " ({:+.0}%)",
                100.0 * (c.effective_bytes as f64 / d as f64 - 1.0)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>10}{dev}",
            format!("L{}{}", c.level, if c.level == 1 { "d" } else { "" }),
            bytes(c.effective_bytes),
            doc(c.documented_bytes),
            ns(c.latency_ns)
        );
    }
    let _ = writeln!(
        s,
        "{:<24} {:>12} {:>12} {:>10}",
        "memory",
        "",
        "",
        ns(r.memory_latency_ns)
    );
    let _ = writeln!(
        s,
        "{:<24} {:>12} {:>12}",
        "line size",
        bytes(r.line.bytes),
        doc(r.line.documented_bytes)
    );
    if r.line.memory_fetch_bytes != r.line.bytes {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12}   (neighbour-line prefetch from memory)",
            "memory fetch unit",
            bytes(r.line.memory_fetch_bytes),
            ""
        );
    }
    let _ = writeln!(
        s,
        "cache curve on {} pages",
        if r.cache_curve_huge_pages {
            "transparent huge"
        } else {
            "base-size"
        }
    );
    let _ = writeln!(
        s,
        "\n{:<24} {:>12} {:>12} {:>12} {:>10}",
        "TLB", "entries", "documented", "reach", "latency"
    );
    for t in &r.tlb {
        let dev = match t.documented_entries {
            Some(d) if d > 0 => format!(" ({:+.0}%)", 100.0 * (t.entries as f64 / d as f64 - 1.0)),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>12} {:>10}{dev}",
            format!("L{} dTLB ({} pages)", t.level, bytes(r.page_bytes)),
            t.entries,
            t.documented_entries.map_or("-".into(), |d| d.to_string()),
            bytes(t.reach_bytes),
            ns(t.latency_ns)
        );
    }
    if r.tlb.is_empty() {
        let _ = writeln!(s, "(no TLB step found)");
    }
    let _ = writeln!(
        s,
        "\n{:<32} {:>11} {:>11} {:>11} {:>13}",
        "timer", "resolution", "claimed", "overhead", "0.1% interval"
    );
    for t in &r.timers {
        let _ = writeln!(
            s,
            "{:<32} {:>11} {:>11} {:>11} {:>13}",
            t.name,
            ns(t.resolution_ns),
            t.claimed_resolution_ns.map_or("-".into(), ns),
            ns(t.overhead_ns),
            ns(t.min_interval_ns)
        );
    }
    if let Some(t) = &r.tsc {
        let doc = match (&t.documented_ghz, &t.documented_source) {
            (Some(g), Some(src)) => format!("{g:.4} GHz ({src})"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "\nTSC frequency: {:.4} GHz measured, documented {doc}",
            t.measured_ghz
        );
    }
    if let Some(cpu) = &r.cpu {
        s.push_str(&crate::render_cpu::cpu_table(cpu));
    }
    if let Some(f) = &r.flush {
        let _ = writeln!(
            s,
            "\nread-flush needed to evict a warm {} operand (warm {}, cold {}):",
            bytes(f.operand_bytes),
            ns(f.warm_ns),
            ns(f.cold_ns)
        );
        let row: Vec<String> = f
            .curve
            .iter()
            .map(|p| format!("{} {}", bytes(p.x), ns(p.ns_monotonic)))
            .collect();
        let _ = writeln!(s, "  {}", row.join(" | "));
    }
    let why = match r.flush.as_ref().and_then(|f| f.sufficient_bytes) {
        Some(_) => "smallest flush reaching 90% of cold",
        None => "2 x effective LLC",
    };
    let _ = writeln!(
        s,
        "\nfor timing drivers: flush {} ({why}), time at least {} per sample ({})",
        bytes(r.recommended_flush_bytes()),
        ns(r.recommended_min_interval_s() * 1e9),
        r.recommended_timer().map_or("-", |t| t.name.as_str())
    );
    s
}

/// Latency against buffer size (log2 x axis), raw and monotonic curves,
/// with each detected level's effective size and latency marked.
pub fn svg(r: &ProbeResult) -> String {
    let (w, h) = (900.0, 520.0);
    let (ml, mr, mt, mb) = (70.0, 30.0, 40.0, 60.0);
    // Total on any input (a result read back is validated, but the plot
    // must not depend on it): only points a log scale can place, and axis
    // bounds that are finite whatever the points are.
    let plottable = |y: f64| y.is_finite() && y > 0.0;
    let pts: Vec<crate::CurvePoint> = r
        .cache_curve
        .iter()
        .filter(|p| p.x > 0 && plottable(p.ns) && plottable(p.ns_monotonic))
        .copied()
        .collect();
    let pts = &pts;
    let xmin = pts
        .iter()
        .map(|p| p.x)
        .min()
        .map_or(1.0, |x| x as f64)
        .log2();
    let xmax = pts
        .iter()
        .map(|p| p.x)
        .max()
        .map_or(2.0, |x| x as f64)
        .log2()
        .max(xmin + 1.0);
    let ymax_raw = pts.iter().map(|p| p.ns).fold(1.0, f64::max);
    let (ymin, ymax) = (0.5f64.log2(), (ymax_raw * 1.3).log2());
    let px = |x: f64| ml + (x.log2() - xmin) / (xmax - xmin) * (w - ml - mr);
    let py = |y: f64| h - mb - (y.max(0.5).log2() - ymin) / (ymax - ymin) * (h - mt - mb);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">Access latency vs buffer size: {}</text>"#,
        w / 2.0,
        xml_escape(&r.cpu_model)
    );
    // Axes with power-of-two ticks and 1-2-5 latency ticks.
    let _ = writeln!(
        s,
        r#"<path d="M{ml} {mt} V{} H{}" stroke="black" fill="none"/>"#,
        h - mb,
        w - mr
    );
    let mut e = xmin.ceil() as i32;
    while f64::from(e) <= xmax && e < 64 {
        let x = px(2f64.powi(e));
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="black"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
            h - mb,
            h - mb + 5.0,
            h - mb + 18.0,
            bytes(1u64 << e).replace(".0 ", " ")
        );
        e += 2;
    }
    for y in [0.5f64, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0] {
        if y.log2() > ymax {
            break;
        }
        let yy = py(y);
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{y}</text>"##,
            w - mr,
            ml - 6.0,
            yy + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">buffer size (log scale)</text>"#,
        (ml + w - mr) / 2.0,
        h - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" transform="rotate(-90 18 {})" text-anchor="middle">ns per access (log scale)</text>"#,
        (mt + h - mb) / 2.0,
        (mt + h - mb) / 2.0
    );
    let poly = |f: &dyn Fn(&crate::CurvePoint) -> f64| {
        pts.iter()
            .map(|p| format!("{:.1},{:.1}", px(p.x as f64), py(f(p))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#999" stroke-width="1" stroke-dasharray="3 2"/>"##,
        poly(&|p| p.ns)
    );
    let _ = writeln!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##,
        poly(&|p| p.ns_monotonic)
    );
    for p in pts {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="#1f77b4"/>"##,
            px(p.x as f64),
            py(p.ns_monotonic)
        );
    }
    let colors = ["#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
    for (i, c) in r
        .caches
        .iter()
        .enumerate()
        .filter(|(_, c)| c.effective_bytes > 0)
    {
        let col = colors[i % colors.len()];
        let x = px(c.effective_bytes as f64);
        let _ = writeln!(
            s,
            r#"<line x1="{x:.1}" y1="{mt}" x2="{x:.1}" y2="{}" stroke="{col}" stroke-dasharray="6 3"/>"#,
            h - mb
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" fill="{col}">L{}: {} @ {}</text>"#,
            x + 4.0,
            mt + 16.0 + 16.0 * i as f64,
            c.level,
            bytes(c.effective_bytes),
            ns(c.latency_ns)
        );
        if let Some(d) = c.documented_bytes.filter(|&d| d > 0) {
            let xd = px(d as f64);
            let _ = writeln!(
                s,
                r#"<line x1="{xd:.1}" y1="{}" x2="{xd:.1}" y2="{}" stroke="{col}" stroke-width="3" opacity="0.5"><title>documented L{} {}</title></line>"#,
                h - mb - 12.0,
                h - mb,
                c.level,
                bytes(d)
            );
        }
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="end" fill="#555">dashed grey: raw; blue: monotonic; dashed lines: effective sizes; ticks on axis: documented</text>"##,
        w - mr,
        mt - 4.0
    );
    s.push_str("</svg>\n");
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
