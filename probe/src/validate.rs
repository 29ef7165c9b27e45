//! Whether a probe result read back from disk is one a probe could have
//! made: every default and every plot is computed from it, so a corrupt or
//! hand-edited file (a zero size, a NaN latency, an unsorted curve) is
//! treated as no cache rather than trusted.

use crate::{CurvePoint, ProbeResult};

/// Sizes beyond this are not a cache, a buffer or a flush of this world.
const MAX_BYTES: u64 = 1 << 44;
/// No access, operation or timer reading takes a second.
const MAX_NS: f64 = 1e9;

fn positive(what: &str, v: f64, max: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(())
    } else {
        Err(format!("{what} is {v}, outside (0, {max}]"))
    }
}

fn non_negative(what: &str, v: f64, max: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} is {v}, outside [0, {max}]"))
    }
}

fn bytes(what: &str, v: u64) -> Result<(), String> {
    if (1..=MAX_BYTES).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} is {v} bytes"))
    }
}

/// A curve: x strictly increasing and within bounds, latencies positive.
fn curve(what: &str, points: &[CurvePoint], max_x: u64) -> Result<(), String> {
    for (i, p) in points.iter().enumerate() {
        if p.x == 0 || p.x > max_x {
            return Err(format!("{what} point {i} has x = {}", p.x));
        }
        positive(&format!("{what} point {i} latency"), p.ns, MAX_NS)?;
        positive(
            &format!("{what} point {i} monotonic latency"),
            p.ns_monotonic,
            MAX_NS,
        )?;
    }
    if let Some(w) = points.windows(2).find(|w| w[0].x >= w[1].x) {
        return Err(format!("{what} is not sorted ({} then {})", w[0].x, w[1].x));
    }
    Ok(())
}

/// `Err` with the first reason the result cannot have come from a probe.
pub fn check(r: &ProbeResult) -> Result<(), String> {
    non_negative("duration_s", r.duration_s, 1e6)?;
    bytes("line size", r.line.bytes)?;
    bytes("memory fetch unit", r.line.memory_fetch_bytes)?;
    if !r.line.bytes.is_power_of_two() || r.line.bytes > 4096 {
        return Err(format!("line size is {} bytes", r.line.bytes));
    }
    if !r.page_bytes.is_power_of_two() || !(512..=1 << 30).contains(&r.page_bytes) {
        return Err(format!("page size is {} bytes", r.page_bytes));
    }
    if r.caches.is_empty() {
        return Err("no cache level".into());
    }
    for c in &r.caches {
        bytes(&format!("L{} effective size", c.level), c.effective_bytes)?;
        positive(&format!("L{} latency", c.level), c.latency_ns, MAX_NS)?;
    }
    positive("memory latency", r.memory_latency_ns, MAX_NS)?;
    for t in &r.tlb {
        if t.entries == 0 || t.entries > 1 << 24 {
            return Err(format!("L{} TLB has {} entries", t.level, t.entries));
        }
        positive(&format!("L{} TLB latency", t.level), t.latency_ns, MAX_NS)?;
    }
    for t in &r.timers {
        non_negative(&format!("{} resolution", t.name), t.resolution_ns, MAX_NS)?;
        non_negative(&format!("{} overhead", t.name), t.overhead_ns, MAX_NS)?;
        positive(
            &format!("{} interval", t.name),
            t.min_interval_ns,
            1e3 * MAX_NS,
        )?;
    }
    if let Some(t) = &r.tsc {
        positive("TSC frequency", t.measured_ghz, 100.0)?;
    }
    curve("cache curve", &r.cache_curve, MAX_BYTES)?;
    curve("TLB curve", &r.tlb_curve, 1 << 32)?;
    if let Some(f) = &r.flush {
        bytes("flush operand", f.operand_bytes)?;
        positive("flush warm latency", f.warm_ns, MAX_NS)?;
        positive("flush cold latency", f.cold_ns, MAX_NS)?;
        curve("flush curve", &f.curve, MAX_BYTES)?;
        if let Some(b) = f.sufficient_bytes {
            bytes("sufficient flush", b)?;
        }
    }
    if let Some(l) = r.load_average {
        non_negative("load average", l, 1e6)?;
    }
    if let Some(cpu) = &r.cpu {
        check_cpu(cpu)?;
    }
    Ok(())
}

fn check_cpu(c: &crate::CpuParams) -> Result<(), String> {
    if let Some(k) = &c.core_clock {
        positive("core clock", k.measured_ghz, 100.0)?;
    }
    for t in &c.fp {
        let what = format!("{} {}", t.op.name(), t.width.name());
        positive(&format!("{what} latency"), t.latency_cycles, 1e4)?;
        positive(
            &format!("{what} throughput"),
            t.recip_throughput_cycles,
            1e4,
        )?;
    }
    for r in &c.fp_registers {
        if !(1..=1024).contains(&r.measured) {
            return Err(format!("{} registers at {}", r.measured, r.isa.name()));
        }
    }
    for (name, a) in [("L1d", &c.l1d_ways), ("L2", &c.l2_ways)] {
        if let Some(w) = a.as_ref().and_then(|a| a.measured) {
            if !(1..=1024).contains(&w) {
                return Err(format!("{name} has {w} ways"));
            }
        }
    }
    if let Some(b) = c.contexts.as_ref().and_then(|x| x.bandwidth.as_ref()) {
        non_negative("bandwidth from one CPU", b.one_cpu_gb_s, 1e6)?;
        non_negative("bandwidth from all CPUs", b.all_cpus_gb_s, 1e6)?;
    }
    Ok(())
}
