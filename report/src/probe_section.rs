//! A probe's section: the latency curves with the detected steps beside
//! the documented sizes, the read-flush curve, and the measured values in
//! tables beside their documented sources.

use crate::chart::{Axis, Chart, ChartError, Mark, Rule, Series, GREY, PALETTE};
use crate::html::{self, Block, Cell, Section};
use probe::ProbeResult;

/// Access latency against buffer size, raw and monotonic, with each
/// detected level's effective size (dashed) and the documented size
/// (solid): the plot `tdg probe --svg` writes.
pub fn latency_chart(r: &ProbeResult) -> Chart {
    let mut ch = Chart::new(
        format!("Access latency against buffer size: {}", r.cpu_model),
        Axis::bytes("buffer size (bytes, log scale)"),
        Axis::log("time per access (ns, log scale)"),
    );
    let raw: Vec<(f64, f64)> = r.cache_curve.iter().map(|p| (p.x as f64, p.ns)).collect();
    let mono: Vec<(f64, f64)> = r
        .cache_curve
        .iter()
        .map(|p| (p.x as f64, p.ns_monotonic))
        .collect();
    let n = mono.len();
    ch.series
        .push(Series::new("as measured", Mark::DashedLine, GREY, raw));
    ch.line_with_dots("monotonic", PALETTE[0], mono);
    for (i, c) in r.caches.iter().enumerate() {
        let color = PALETTE[(i + 1) % PALETTE.len()];
        ch.rules.push(Rule::measured(
            c.effective_bytes as f64,
            format!(
                "L{} {} @ {}",
                c.level,
                stats::bytes(c.effective_bytes),
                stats::ns(c.latency_ns)
            ),
            color,
        ));
        if let Some(d) = c.documented_bytes {
            ch.rules.push(Rule::documented(
                d as f64,
                String::new(),
                color.mix_to_rgb(0.45),
            ));
        }
    }
    ch.height = 460;
    ch.description = format!(
        "{n} buffer sizes measured by pointer chasing; {} cache levels detected (dashed lines: effective sizes; solid lines: documented sizes from sysfs).",
        r.caches.len()
    );
    ch
}

/// Mixing toward white for the documented sizes' lighter rules.
trait Lighter {
    fn mix_to_rgb(self, t: f64) -> plotters::style::RGBColor;
}

impl Lighter for plotters::style::RGBColor {
    fn mix_to_rgb(self, t: f64) -> plotters::style::RGBColor {
        let m = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * t).round() as u8;
        plotters::style::RGBColor(m(self.0), m(self.1), m(self.2))
    }
}

/// The standalone SVG of [`latency_chart`].
pub fn latency_svg(r: &ProbeResult) -> Result<String, ChartError> {
    latency_chart(r).svg()
}

pub fn section(id: &str, r: &ProbeResult) -> Result<Section, ChartError> {
    let mut body: Vec<Block> = vec![facts(r), latency_figure(id, r)?, cache_table(id, r)];
    if !r.tlb_curve.is_empty() {
        body.push(tlb_figure(id, r)?);
        body.push(tlb_table(id, r));
    }
    if let Some(f) = &r.flush {
        body.extend(flush_figure(id, f)?);
    }
    body.push(timer_table(id, r));
    if let Some(t) = &r.tsc {
        body.push(html::para(&format!(
            "TSC: {:.4} GHz measured; documented {}.",
            t.measured_ghz,
            match (&t.documented_ghz, &t.documented_source) {
                (Some(g), Some(src)) => format!("{g:.4} GHz ({src})"),
                _ => "nowhere".into(),
            }
        )));
    }
    if let Some(cpu) = &r.cpu {
        crate::cpu_section::cpu(id, cpu, &mut body)?;
    }
    Ok(Section {
        id: id.into(),
        kind: "probe",
        heading: format!("Probe of {}", r.cpu_model),
        blocks: body,
    })
}

/// What was probed, when, under what load, and what drivers take from it.
fn facts(r: &ProbeResult) -> Block {
    let mut facts: Vec<(&str, String)> = vec![
        ("CPU", r.cpu_model.clone()),
        (
            "measured",
            format!(
                "{} in {:.1} s on {} CPU(s)",
                formats::machine::date_utc(r.measured_at_unix),
                r.duration_s,
                r.cpus
            ),
        ),
    ];
    if let Some(l) = r.load_average {
        facts.push((
            "load while probing",
            format!(
                "{l:.2}{}",
                if r.was_busy() {
                    " (busy: effective sizes read smaller and noisier than on an idle machine)"
                } else {
                    ""
                }
            ),
        ));
    }
    facts.push((
        "line",
        format!(
            "{} (documented {}); memory fetches {}",
            stats::bytes(r.line.bytes),
            r.line.documented_bytes.map_or("-".into(), stats::bytes),
            stats::bytes(r.line.memory_fetch_bytes)
        ),
    ));
    facts.push(("memory latency", stats::ns(r.memory_latency_ns)));
    facts.push((
        "for timing drivers",
        format!(
            "flush {}, at least {} per sample ({})",
            stats::bytes(r.recommended_flush_bytes()),
            stats::ns(r.recommended_min_interval_s() * 1e9),
            r.recommended_timer().map_or("-", |t| t.name.as_str())
        ),
    ));
    html::facts(&facts)
}

fn latency_figure(id: &str, r: &ProbeResult) -> Result<Block, ChartError> {
    let ch = latency_chart(r);
    Ok(html::figure(
        &format!("{id}-latency"),
        "latency",
        &ch.svg()?,
        &format!(
            "Time per access of a pointer chase over buffers of {} to {} on {} pages; dashed lines mark each detected level's effective size, solid pale lines the size sysfs documents.",
            r.cache_curve.first().map_or("-".into(), |p| stats::bytes(p.x)),
            r.cache_curve.last().map_or("-".into(), |p| stats::bytes(p.x)),
            if r.cache_curve_huge_pages { "transparent huge" } else { "base-size" }
        ),
    ))
}

/// Each cache level's effective size beside the documented one.
fn cache_table(id: &str, r: &ProbeResult) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> = r
        .caches
        .iter()
        .map(|c| {
            let dev = match c.documented_bytes {
                Some(d) if d > 0 => format!(
                    "{:+.0} %",
                    100.0 * (c.effective_bytes as f64 / d as f64 - 1.0)
                ),
                _ => "-".into(),
            };
            (
                vec![
                    Cell::text(format!(
                        "L{}{}",
                        c.level,
                        if c.level == 1 { "d" } else { "" }
                    )),
                    Cell::num(stats::bytes(c.effective_bytes)),
                    Cell::num(
                        c.documented_bytes
                            .map_or("not documented".into(), stats::bytes),
                    ),
                    Cell::num(dev),
                    Cell::num(stats::ns(c.latency_ns)),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-caches"),
        "Cache levels: the effective size (largest buffer still at the level's latency) beside the documented one (sysfs)",
        &["cache", "effective", "documented", "difference", "latency"],
        rows,
    )
}

/// Latency against pages touched: where the TLB levels run out.
fn tlb_figure(id: &str, r: &ProbeResult) -> Result<Block, ChartError> {
    let mut t = Chart::new(
        "Access latency against pages touched (one line per page)",
        Axis::log("pages touched (log scale)"),
        Axis::log("time per access (ns, log scale)"),
    );
    let pts: Vec<(f64, f64)> = r
        .tlb_curve
        .iter()
        .map(|p| (p.x as f64, p.ns_monotonic))
        .collect();
    t.series.push(Series::new(
        "as measured",
        Mark::DashedLine,
        GREY,
        r.tlb_curve.iter().map(|p| (p.x as f64, p.ns)).collect(),
    ));
    t.series
        .push(Series::new("monotonic", Mark::Line, PALETTE[0], pts));
    for (i, l) in r.tlb.iter().enumerate() {
        let color = PALETTE[(i + 1) % PALETTE.len()];
        t.rules.push(Rule::measured(
            l.entries as f64,
            format!("L{} dTLB {} entries", l.level, l.entries),
            color,
        ));
        if let Some(d) = l.documented_entries {
            t.rules.push(Rule::documented(
                d as f64,
                String::new(),
                color.mix_to_rgb(0.45),
            ));
        }
    }
    t.height = 360;
    t.description = format!(
        "{} page counts measured; {} TLB levels detected (dashed: measured entries; solid: documented).",
        r.tlb_curve.len(),
        r.tlb.len()
    );
    Ok(html::figure(
        &format!("{id}-tlb"),
        "tlb",
        &t.svg()?,
        &format!(
            "One access per {} page; the steps are where the TLB levels run out.",
            stats::bytes(r.page_bytes)
        ),
    ))
}

fn tlb_table(id: &str, r: &ProbeResult) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> = r
        .tlb
        .iter()
        .map(|l| {
            (
                vec![
                    Cell::text(format!("L{} dTLB", l.level)),
                    Cell::num(l.entries.to_string()),
                    Cell::num(
                        l.documented_entries
                            .map_or("not documented".into(), |d| d.to_string()),
                    ),
                    Cell::num(stats::bytes(l.reach_bytes)),
                    Cell::num(stats::ns(l.latency_ns)),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-tlb-levels"),
        "TLB levels: measured entries beside the documented ones (cpuid)",
        &["TLB", "entries", "documented", "reach", "latency"],
        rows,
    )
}

/// A warm operand re-read after read-flushes of growing size (none
/// without a curve).
fn flush_figure(id: &str, f: &probe::FlushProbe) -> Result<Option<Block>, ChartError> {
    if f.curve.is_empty() {
        return Ok(None);
    }
    let mut fc = Chart::new(
        format!(
            "Re-reading a warm {} operand after a read-flush",
            stats::bytes(f.operand_bytes)
        ),
        Axis::bytes("read-flush size (bytes, log scale)"),
        Axis::linear("time per access (ns)"),
    );
    fc.line_with_dots(
        "after the flush",
        PALETTE[0],
        f.curve
            .iter()
            .map(|p| (p.x as f64, p.ns_monotonic))
            .collect(),
    );
    if let Some(s) = f.sufficient_bytes {
        fc.rules.push(Rule::measured(
            s as f64,
            format!("sufficient: {}", stats::bytes(s)),
            PALETTE[1],
        ));
    }
    fc.height = 340;
    fc.description = format!(
        "{} flush sizes; warm {} and cold {} per access.",
        f.curve.len(),
        stats::ns(f.warm_ns),
        stats::ns(f.cold_ns)
    );
    Ok(Some(html::figure(
        &format!("{id}-flush"),
        "flush",
        &fc.svg()?,
        &format!(
            "Warm {} per access, cold {}; the dashed line is the smallest flush that reaches 90 % of the way to cold.",
            stats::ns(f.warm_ns),
            stats::ns(f.cold_ns)
        ),
    )))
}

fn timer_table(id: &str, r: &ProbeResult) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> = r
        .timers
        .iter()
        .map(|t| {
            (
                vec![
                    Cell::text(t.name.clone()),
                    Cell::num(stats::ns(t.resolution_ns)),
                    Cell::num(t.claimed_resolution_ns.map_or("-".into(), stats::ns)),
                    Cell::num(stats::ns(t.overhead_ns)),
                    Cell::num(stats::ns(t.min_interval_ns)),
                ],
                "",
            )
        })
        .collect();
    html::table(
        &format!("{id}-timers"),
        "Timers: measured resolution beside the claimed one, the cost of a reading, and the shortest interval timed within 0.1 %",
        &["timer", "resolution", "claimed", "overhead", "0.1 % interval"],
        rows,
    )
}
