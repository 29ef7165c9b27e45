//! The CPU values of a probe (`probe::CpuParams`), when it measured them:
//! each beside its documented value and where that came from, the
//! floating-point latencies by vector width, the register-spill curve and
//! the associativity curve with the steps the probe detected.

use crate::chart::{Axis, Chart, ChartError, Mark, Rule, Series, PALETTE};
use crate::html::{self, Block, Cell};
use probe::cpu::{yes_no, CpuParams, WaysMethod};

use probe::cpu::{Associativity, RegisterCount};

pub fn cpu(id: &str, c: &CpuParams, body: &mut Vec<Block>) -> Result<(), ChartError> {
    body.push(html::heading("The CPU"));
    let mut facts = processor_facts(c);
    facts.extend(context_facts(c));
    body.push(html::facts(&facts));
    if !c.fp.is_empty() {
        body.push(fp_table(id, c));
        body.push(fp_latency(id, c)?);
    }
    for r in &c.fp_registers {
        body.extend(register_figure(id, r)?);
    }
    for (name, ways) in [("L1d", &c.l1d_ways), ("L2", &c.l2_ways)] {
        body.extend(ways_figure(id, name, ways)?);
    }
    Ok(())
}

/// The processor, its clock, FMA, registers and associativity, each beside
/// its documented value.
fn processor_facts(c: &CpuParams) -> Vec<(&'static str, String)> {
    let mut facts: Vec<(&str, String)> = vec![(
        "processor",
        format!(
            "{} ({} family {} model {})",
            c.microarchitecture
                .as_deref()
                .unwrap_or("not in the vendor table"),
            c.vendor,
            c.family,
            c.model
        ),
    )];
    if let Some(k) = &c.core_clock {
        facts.push(("core clock", k.described()));
    }
    let f = &c.fma;
    facts.push((
        "FMA",
        format!(
            "{}; documented {}",
            match f.fused {
                Some(true) => "fused (measured)".to_string(),
                Some(false) => "not fused: the product is rounded first (measured)".to_string(),
                None => "not available".to_string(),
            },
            f.documented.value.map_or_else(
                || f.documented.source.to_string(),
                |v| format!("{} ({})", yes_no(v), f.documented.source)
            )
        ),
    ));
    for r in &c.fp_registers {
        facts.push((
            "FP registers",
            format!(
                "{} usable with {} (measured); documented {}",
                r.measured,
                r.isa.name(),
                r.documented
            ),
        ));
    }
    for (name, ways) in [("L1d ways", &c.l1d_ways), ("L2 ways", &c.l2_ways)] {
        if let Some(w) = ways {
            facts.push((
                name,
                format!(
                    "{} measured; documented {}{}",
                    w.measured.map_or("not measured".into(), |m| m.to_string()),
                    w.documented,
                    w.note
                        .as_ref()
                        .map(|n| format!("; {n}"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    facts
}

/// What the CPUs share with each other, and the memory bandwidth.
fn context_facts(c: &CpuParams) -> Vec<(&'static str, String)> {
    let mut facts: Vec<(&str, String)> = Vec::new();
    if let Some(ctx) = &c.contexts {
        for p in &ctx.pairs {
            let shared: Vec<String> = p
                .caches
                .iter()
                .map(|s| {
                    format!(
                        "L{} {} ({:.2}x slower beside the other)",
                        s.level,
                        if s.shared { "shared" } else { "not shared" },
                        s.slowdown
                    )
                })
                .collect();
            facts.push((
                "CPU pair",
                format!(
                    "{} and {}: {} a core ({:.2}x compute beside each other; documented {}){}",
                    p.cpus[0],
                    p.cpus[1],
                    if p.shares_core {
                        "share"
                    } else {
                        "do not share"
                    },
                    p.compute_ratio,
                    p.documented_shares_core,
                    if shared.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", shared.join(", "))
                    }
                ),
            ));
        }
        if let Some(b) = &ctx.bandwidth {
            facts.push((
                "memory bandwidth",
                format!(
                    "{:.1} GB/s from one CPU, {:.1} GB/s from {} (reading {})",
                    b.one_cpu_gb_s,
                    b.all_cpus_gb_s,
                    b.cpus,
                    stats::bytes(b.buffer_bytes)
                ),
            ));
        }
    }
    facts
}

/// The double-precision operations' latency and throughput.
fn fp_table(id: &str, c: &CpuParams) -> Block {
    let rows: Vec<(Vec<Cell>, &str)> =
        c.fp.iter()
            .map(|t| {
                (
                    vec![
                        Cell::text(t.op.name()),
                        Cell::text(t.width.name()),
                        Cell::num(format!("{:.2}", t.latency_cycles)),
                        Cell::text(t.documented_latency_cycles.to_string()),
                        Cell::num(format!("{:.2}", t.recip_throughput_cycles)),
                        Cell::num(t.chains.to_string()),
                    ],
                    "",
                )
            })
            .collect();
    html::table(
        &format!("{id}-fp"),
        "Double-precision operations: latency and reciprocal throughput in core cycles, measured beside the documented latency",
        &["operation", "width", "latency (cycles)", "documented", "recip. throughput (cycles)", "chains"],
        rows,
    )
}

/// The latency by vector width, measured beside documented.
fn fp_latency(id: &str, c: &CpuParams) -> Result<Block, ChartError> {
    let mut ch = Chart::new(
        "Double-precision latency by vector width",
        Axis::integer("doubles per vector (1 scalar, 2 SSE2, 4 AVX2, 8 AVX-512)"),
        Axis::linear("latency (core cycles)"),
    );
    for (k, op) in probe::cpu::FpOp::ALL.iter().enumerate() {
        let of: Vec<&probe::cpu::FpTiming> = c.fp.iter().filter(|t| t.op == *op).collect();
        if of.is_empty() {
            continue;
        }
        ch.series.push(Series::new(
            format!("{} measured", op.name()),
            Mark::Dots,
            PALETTE[k % PALETTE.len()],
            of.iter()
                .map(|t| (f64::from(t.width.doubles()), t.latency_cycles))
                .collect(),
        ));
        let doc: Vec<(f64, f64)> = of
            .iter()
            .filter_map(|t| {
                t.documented_latency_cycles
                    .value
                    .map(|d| (f64::from(t.width.doubles()), d))
            })
            .collect();
        if !doc.is_empty() {
            ch.series.push(Series::new(
                format!("{} documented", op.name()),
                Mark::Rings,
                PALETTE[k % PALETTE.len()],
                doc,
            ));
        }
    }
    ch.width = 640;
    ch.height = 320;
    ch.description = format!(
        "{} latencies measured (dots) beside the documented ones (rings).",
        c.fp.len()
    );
    Ok(html::figure(
        &format!("{id}-fp-latency"),
        "fp-latency",
        &ch.svg()?,
        "Dots: measured latency of a dependent chain; rings: the vendor's or cpuid's figure.",
    ))
}

/// Cycles per operation against live values: where the registers run out.
fn register_figure(id: &str, r: &RegisterCount) -> Result<Option<Block>, ChartError> {
    if r.cycles_per_op.len() < 2 {
        return Ok(None);
    }
    let mut ch = Chart::new(
        format!(
            "Cycles per operation against live values ({})",
            r.isa.name()
        ),
        Axis::integer("independent accumulators kept live"),
        Axis::linear("core cycles per operation"),
    );
    ch.line_with_dots(
        "measured",
        PALETTE[0],
        r.cycles_per_op
            .iter()
            .map(|(n, c)| (f64::from(*n), *c))
            .collect(),
    );
    ch.rules.push(Rule::measured(
        f64::from(r.measured),
        format!("spills past {}", r.measured),
        PALETTE[1],
    ));
    if let Some(d) = r.documented.value {
        ch.rules.push(Rule::documented(
            f64::from(d),
            format!("documented {d}"),
            PALETTE[2],
        ));
    }
    ch.width = 640;
    ch.height = 300;
    ch.description = format!(
        "{} accumulator counts timed; spilling begins past {}.",
        r.cycles_per_op.len(),
        r.measured
    );
    Ok(Some(html::figure(
        &format!("{id}-registers-{}", r.isa.name()),
        "registers",
        &ch.svg()?,
        "The time per operation rises where the live values no longer fit the registers and the compiler spills them.",
    )))
}

/// A cache's time per access against lines at one set.
fn ways_figure(
    id: &str,
    name: &str,
    ways: &Option<Associativity>,
) -> Result<Option<Block>, ChartError> {
    let Some(w) = ways else { return Ok(None) };
    let WaysMethod::ConflictStride {
        stride_bytes,
        curve,
    } = &w.method
    else {
        return Ok(None);
    };
    if curve.len() < 2 {
        return Ok(None);
    }
    let mut ch = Chart::new(
        format!("{name}: time per access against lines at one set"),
        Axis::integer(format!("lines {} apart", stats::bytes(*stride_bytes))),
        Axis::linear("time per access (ns)"),
    );
    ch.line_with_dots(
        "measured",
        PALETTE[0],
        curve.iter().map(|(n, t)| (f64::from(*n), *t)).collect(),
    );
    if let Some(m) = w.measured {
        ch.rules.push(Rule::measured(
            f64::from(m),
            format!("{m} ways"),
            PALETTE[1],
        ));
    }
    if let Some(d) = w.documented.value {
        ch.rules
            .push(Rule::documented(f64::from(d), String::new(), PALETTE[2]));
    }
    ch.width = 640;
    ch.height = 300;
    ch.description = format!(
        "{} counts of conflicting lines timed for {name}.",
        curve.len()
    );
    Ok(Some(html::figure(
        &format!("{id}-ways-{}", name.to_lowercase()),
        "ways",
        &ch.svg()?,
        "Lines that map to one set stay cached up to the associativity; one more and they evict each other.",
    )))
}
