//! The CPU side of the probe as text: each measured value beside the
//! documented one and where that came from.

use crate::cpu::{yes_no, CpuParams, ExecutionContexts, WaysMethod, Width};
use std::fmt::Write as _;

/// The CPU section of `tdg probe`'s table: the processor and its clock,
/// floating-point latencies and throughputs, FMA, registers, associativity
/// and the execution contexts, each measured beside the documented value.
pub fn cpu_table(c: &CpuParams) -> String {
    let mut s = String::new();
    processor(&mut s, c);
    floating_point(&mut s, c);
    registers(&mut s, c);
    associativity(&mut s, c);
    if let Some(x) = &c.contexts {
        contexts(&mut s, x);
    }
    s
}

fn processor(s: &mut String, c: &CpuParams) {
    let _ = writeln!(
        s,
        "\nCPU: {} ({} family {} model {}; this side of the probe took {:.1} s)",
        c.microarchitecture
            .as_deref()
            .unwrap_or("not in the vendor table"),
        c.vendor,
        c.family,
        c.model,
        c.duration_s
    );
    if let Some(k) = &c.core_clock {
        let _ = writeln!(s, "core clock {}", k.described());
    }
}

/// Each operation's latency and reciprocal throughput, then whether FMA
/// is fused.
fn floating_point(s: &mut String, c: &CpuParams) {
    let _ = writeln!(
        s,
        "\n{:<24} {:>14} {:>16} {:>22}",
        "double precision", "latency", "documented", "recip. throughput"
    );
    for t in &c.fp {
        let _ = writeln!(
            s,
            "{:<24} {:>7.2} cycles {:>16} {:>8.2} cycles ({} chains)",
            format!("{} {}", t.op.name(), t.width.name()),
            t.latency_cycles,
            t.documented_latency_cycles.to_string(),
            t.recip_throughput_cycles,
            t.chains
        );
    }
    let f = &c.fma;
    let fused = match f.fused {
        Some(true) => "fused (the exact product is kept: measured)",
        Some(false) => "NOT fused (the product is rounded first: measured)",
        None => "not available",
    };
    let latencies = match (f.fma_latency_cycles, f.mul_then_add_latency_cycles) {
        (Some(a), Some(b)) => format!("; chain {a:.2} cycles against {b:.2} as multiply then add"),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "FMA: {fused}, cpuid {}{latencies}",
        f.documented.value.map_or_else(
            || f.documented.source.to_string(),
            |v| yes_no(v).to_string()
        )
    );
}

fn registers(s: &mut String, c: &CpuParams) {
    let _ = writeln!(
        s,
        "\n{:<36} {:>9} {:>16}",
        "floating-point registers", "measured", "documented"
    );
    for r in &c.fp_registers {
        let label = match r.isa {
            Width::Avx512 => "kernels built with AVX-512",
            _ => "kernels built for SSE2/AVX2",
        };
        let _ = writeln!(
            s,
            "{:<36} {:>9} {:>16}",
            label,
            r.measured,
            r.documented.to_string()
        );
    }
}

fn associativity(s: &mut String, c: &CpuParams) {
    let _ = writeln!(
        s,
        "\n{:<24} {:>9} {:>16}",
        "associativity", "measured", "documented"
    );
    for (name, a) in [("L1d", &c.l1d_ways), ("L2", &c.l2_ways)] {
        let Some(a) = a else { continue };
        let how = match &a.method {
            WaysMethod::ConflictStride { stride_bytes, .. } => {
                format!(
                    "conflicting addresses {} apart",
                    stats::bytes(*stride_bytes)
                )
            }
            WaysMethod::EvictionSets {
                pool_lines, sizes, ..
            } => format!("minimal eviction sets {sizes:?} from {pool_lines} lines"),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>9} {:>16}  {how}{}",
            name,
            a.measured.map_or("-".to_string(), |w| format!("{w} ways")),
            a.documented.to_string(),
            a.note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default()
        );
    }
}

/// Which pairs of CPUs share a core or a cache, measured and as sysfs says,
/// and the memory bandwidth from one CPU and from all.
fn contexts(s: &mut String, x: &ExecutionContexts) {
    let cpus: Vec<String> = x.cpus.iter().map(u32::to_string).collect();
    let _ = writeln!(s, "\nexecution contexts: CPUs {}", cpus.join(","));
    for p in &x.pairs {
        let mut parts = vec![format!(
            "core {} (x{:.2} compute each; sysfs: {})",
            if p.shares_core {
                "SHARED"
            } else {
                "not shared"
            },
            p.compute_ratio,
            documented_sharing(p.documented_shares_core.value)
        )];
        for c in &p.caches {
            parts.push(format!(
                "L{} {} (x{:.2} chasing {} each; sysfs: {})",
                c.level,
                if c.shared { "SHARED" } else { "not shared" },
                c.slowdown,
                stats::bytes(c.buffer_bytes),
                documented_sharing(c.documented_shared.value)
            ));
        }
        let _ = writeln!(
            s,
            "  CPUs {}+{}: {}",
            p.cpus[0],
            p.cpus[1],
            parts.join(", ")
        );
    }
    if let Some(b) = &x.bandwidth {
        let _ = writeln!(
            s,
            "memory read bandwidth: {:.1} GB/s from one CPU, {:.1} GB/s from {} at once ({} read)",
            b.one_cpu_gb_s,
            b.all_cpus_gb_s,
            b.cpus,
            stats::bytes(b.buffer_bytes)
        );
    }
}

/// What sysfs says about a pair sharing a core or cache.
fn documented_sharing(shared: Option<bool>) -> &'static str {
    match shared {
        Some(true) => "shared",
        Some(false) => "not shared",
        None => "not documented",
    }
}

/// One line of the CPU values beside the documented ones, for `tdg doctor`.
pub fn cpu_summary(c: &CpuParams) -> String {
    let mut parts = Vec::new();
    if let Some(k) = &c.core_clock {
        parts.push(format!("core clock {:.2} GHz", k.measured_ghz));
    }
    let scalar: Vec<String> = crate::cpu::FpOp::ALL
        .iter()
        .filter_map(|&op| c.fp_timing(op, Width::Scalar))
        .map(|t| {
            format!(
                "{} {:.1}{}",
                t.op.name(),
                t.latency_cycles,
                t.documented_latency_cycles
                    .value
                    .map(|d| format!(" ({d} {})", t.documented_latency_cycles.source))
                    .unwrap_or_default()
            )
        })
        .collect();
    if !scalar.is_empty() {
        parts.push(format!("latency cycles {}", scalar.join(", ")));
    }
    for r in &c.fp_registers {
        parts.push(format!(
            "{} FP registers{} ({})",
            r.measured,
            if r.isa == Width::Avx512 {
                " with AVX-512"
            } else {
                ""
            },
            r.documented
        ));
    }
    if let Some(f) = c.fma.fused {
        parts.push(format!("FMA {}", if f { "fused" } else { "not fused" }));
    }
    for (name, a) in [("L1d", &c.l1d_ways), ("L2", &c.l2_ways)] {
        if let Some(a) = a {
            parts.push(format!(
                "{name} {} ways ({})",
                a.measured.map_or("-".to_string(), |w| w.to_string()),
                a.documented
            ));
        }
    }
    if let Some(b) = c.contexts.as_ref().and_then(|x| x.bandwidth.as_ref()) {
        parts.push(format!(
            "memory {:.1} GB/s from one CPU, {:.1} from {}",
            b.one_cpu_gb_s, b.all_cpus_gb_s, b.cpus
        ));
    }
    parts.join("; ")
}
