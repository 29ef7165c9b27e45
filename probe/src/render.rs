//! The probe result as text: measured values beside the documented ones.
//! (Its plots are the report's charts: `report::probe_section`.)

use crate::ProbeResult;
use stats::{bytes, ns};
use std::fmt::Write as _;

/// Measured values beside the documented ones, as a text table: the
/// caches, the TLB, the timers, the CPU and what drivers take from them.
pub fn table(r: &ProbeResult) -> String {
    let mut s = String::new();
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
    caches(&mut s, r);
    tlb(&mut s, r);
    timers(&mut s, r);
    if let Some(cpu) = &r.cpu {
        s.push_str(&crate::render_cpu::cpu_table(cpu));
    }
    flush(&mut s, r);
    s
}

/// A documented size or count, or `-` where none is documented.
fn documented(d: Option<u64>, show: impl Fn(u64) -> String) -> String {
    d.map_or("-".to_string(), show)
}

/// How far a measured value lies from the documented one, ` (+N%)`; empty
/// where nothing (or zero) is documented.
fn deviation(measured: u64, documented: Option<u64>) -> String {
    match documented {
        Some(d) if d > 0 => format!(" ({:+.0}%)", 100.0 * (measured as f64 / d as f64 - 1.0)),
        _ => String::new(),
    }
}

fn caches(s: &mut String, r: &ProbeResult) {
    let _ = writeln!(
        s,
        "\n{:<24} {:>12} {:>12} {:>10}",
        "cache", "effective", "documented", "latency"
    );
    for c in &r.caches {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>10}{}",
            format!("L{}{}", c.level, if c.level == 1 { "d" } else { "" }),
            bytes(c.effective_bytes),
            documented(c.documented_bytes, bytes),
            ns(c.latency_ns),
            deviation(c.effective_bytes, c.documented_bytes)
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
        documented(r.line.documented_bytes, bytes)
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
}

fn tlb(s: &mut String, r: &ProbeResult) {
    let _ = writeln!(
        s,
        "\n{:<24} {:>12} {:>12} {:>12} {:>10}",
        "TLB", "entries", "documented", "reach", "latency"
    );
    for t in &r.tlb {
        let _ = writeln!(
            s,
            "{:<24} {:>12} {:>12} {:>12} {:>10}{}",
            format!("L{} dTLB ({} pages)", t.level, bytes(r.page_bytes)),
            t.entries,
            documented(t.documented_entries, |d| d.to_string()),
            bytes(t.reach_bytes),
            ns(t.latency_ns),
            deviation(t.entries, t.documented_entries)
        );
    }
    if r.tlb.is_empty() {
        let _ = writeln!(s, "(no TLB step found)");
    }
}

fn timers(s: &mut String, r: &ProbeResult) {
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
}

/// The read-flush sweep, and the settings drivers take from the probe.
fn flush(s: &mut String, r: &ProbeResult) {
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
}
