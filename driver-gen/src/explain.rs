//! `tdg explain`: the driver model in words. Built from the same model the
//! templates render, so the explanation cannot drift from the driver.

use crate::cexpr;
use crate::model::{CacheState, DriverModel, Storage};
use crate::render::ScalarKindView;
use spec_lang::ast::{FlushMethod, TimerMethod};
use spec_lang::vocabulary::Keyword;
use std::fmt::Write;

/// `800000 bytes (781 KiB)`: the exact count, and the short form.
fn bytes_text(b: u64) -> String {
    if b >= 1 << 10 {
        format!("{b} bytes ({})", stats::bytes(b))
    } else {
        format!("{b} bytes")
    }
}

pub fn explain(m: &DriverModel) -> String {
    let mut s = String::new();
    let t = &m.timing;
    let f = &m.flush;
    let _ = writeln!(
        s,
        "Driver for {} (links symbol `{}`)",
        m.routine.name, m.routine.symbol
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "Scalars (set before the first call, in this order):");
    for sc in &m.scalars {
        let val = sc
            .value
            .map(|v| v.to_string())
            .filter(|v| *v != sc.text)
            .map(|v| format!(" = {v}"))
            .unwrap_or_default();
        let how = match ScalarKindView::of(sc, &m.names.env()) {
            Ok(ScalarKindView::Fixed) => "fixed for every call".to_string(),
            Ok(ScalarKindView::Range { incr_c }) => format!("advances by {incr_c} after each call"),
            Ok(ScalarKindView::Random { lo_c, hi_c }) => {
                format!("redrawn uniformly in [{lo_c}, {hi_c}] for each call")
            }
            Err(e) => format!("changes per call ({e})"),
        };
        let _ = writeln!(
            s,
            "  {} ({}) = {}{val}: {how}",
            sc.name,
            sc.field_type.text(),
            sc.text
        );
        if let Some(why) = sc.implicit_reason {
            let _ = writeln!(s, "      no init in the spec: set to {} ({why})", sc.text);
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Operands:");
    for o in &m.operands {
        let count = match (o.rows_value, o.cols_value) {
            (Some(r), Some(c)) => Some(r.max(0) as u64 * c.max(0) as u64),
            _ => None,
        };
        let bytes = match (count, o.elem_bytes) {
            (Some(n), Some(e)) => {
                let mut b = n * e;
                if o.storage == Storage::RowPointers {
                    b += o.rows_value.unwrap_or(0).max(0) as u64 * 8;
                }
                bytes_text(b)
            }
            (Some(n), None) => format!("{n} x sizeof({})", o.elem_type.text()),
            _ => "size known at run time".to_string(),
        };
        let shape = o
            .dims
            .iter()
            .map(|d| cexpr::describe(&d.expr))
            .collect::<Vec<_>>()
            .join(" x ");
        let storage = match o.storage {
            Storage::Heap => "one heap block",
            Storage::RowPointers => "a row-pointer array with one heap block per row",
            Storage::Static => "static storage",
        };
        let _ = writeln!(
            s,
            "  {} ({}): {} [{}] in {}, {}",
            o.name,
            o.param_type.text(),
            o.elem_type.text(),
            shape,
            storage,
            bytes
        );
        let align = if o.misalign > 0 {
            format!(
                "aligned to {} bytes and never to {} (pointer mod {} is a non-zero multiple of {})",
                o.align, o.misalign, o.misalign, o.align
            )
        } else {
            format!("aligned to {} bytes", o.align)
        };
        let _ = writeln!(s, "      alignment: {align}");
        let _ = writeln!(
            s,
            "      fill: {}; every page written before timing",
            o.fill.text
        );
        let cache = match o.cache {
            CacheState::Flushed => match f.method.value {
                FlushMethod::Read => format!(
                    "out of cache: {} before each single-call sample; \
                     with R > 1 calls per sample it rotates through working-set copies that together exceed {} KiB",
                    if let Some(e) = &f.eviction {
                        format!(
                            "its lines are clflush'ed, then a {} KiB buffer is read and {} pages are touched (evicting the driver's data and the TLB entries)",
                            e.read_kib, e.tlb_pages
                        )
                    } else if f.to_memory {
                        format!(
                            "its lines are clflush'ed and a {} KiB buffer is read (evicting code, TLB entries, other data)",
                            f.kib.value
                        )
                    } else {
                        format!("evicted by reading a {} KiB buffer", f.kib.value)
                    },
                    f.kib.value
                ),
                FlushMethod::Clflush => format!(
                    "out of cache: its lines are clflush'ed before each single-call sample; \
                     with R > 1 it rotates through copies exceeding {} KiB",
                    f.kib.value
                ),
                FlushMethod::None => "in cache (flushing is off)".to_string(),
            },
            CacheState::Warm => {
                "in cache: re-read after any flush, the same copy for every call".to_string()
            }
            CacheState::Unflushed => match f.method.value {
                FlushMethod::Read => "not flushed (no `flush` attribute): the same copy for every call, as its initialisation and the previous calls leave it; \
                     a read flush made for other operands evicts it too (mark it `warm` to keep it in cache)"
                    .to_string(),
                _ => "not flushed (no `flush` attribute): the same copy for every call, as its initialisation and the previous calls leave it"
                    .to_string(),
            },
        };
        let cache = if o.storage == Storage::Static && o.cache == CacheState::Flushed {
            format!(
                "{}; but static storage cannot rotate, so with R > 1 calls per sample it stays at one address (cached after the first call)",
                cache.split("; with R > 1").next().unwrap_or(&cache)
            )
        } else {
            cache
        };
        let _ = writeln!(s, "      before each timed call: {cache}");
        if o.is_output {
            let _ = writeln!(
                s,
                "      written by the routine: restored from a pristine copy before each sample"
            );
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Timing:");
    let _ = writeln!(
        s,
        "  timer {} ({}; overhead measured through the timed path and subtracted); report the {} ({})",
        t.method.value.spelling(),
        t.method.origin(),
        t.selection.value.spelling(),
        t.selection.origin()
    );
    let sampling = &t.sampling;
    let _ = writeln!(
        s,
        "  samples: at least {}, spread over at least {} ms, until the {} of the first and the second half agree within {}% \
         (the stated uncertainty); at {} ms the figure is reported as unstable ({}); --samples N takes exactly N",
        t.samples.value,
        sampling.min_time_ms.value,
        t.selection.value.spelling(),
        sampling.stable_pct.value,
        sampling.max_time_ms.value,
        sampling_origins(t)
    );
    let _ = writeln!(
        s,
        "  one call per sample if a call lasts >= {} ns ({}{}); otherwise R calls per sample, R doubled until it does",
        t.min_interval_ns.value,
        t.min_interval_ns.origin(),
        if t.min_interval_is_machine_default() && t.method.value != TimerMethod::Cycle {
            "; replaced by 1000 steps of the timer in use, at least 10 us"
        } else {
            ""
        }
    );
    if let (true, Some(e)) = (f.any_operand_flushed, &f.eviction) {
        let _ = writeln!(
            s,
            "  flush: before each single-call sample, clflush of the flushed operands (out of every cache level, whatever \
             its size), then a read of {} KiB ({}: the driver's own data leaves the private caches) and one load in each \
             of {} pages ({}: the operands' address translations leave the TLB){}; it reads about {} per sample whatever \
             the last-level cache holds (its full read flush would be {} KiB, {}), and `tdg run` reports what it costs \
             per sample; after it the program's code is read back (operands cold, code hot, as in a loop of the \
             application; --cold-code leaves it cold); with R > 1 calls per sample the working sets rotate through \
             {} KiB instead",
            e.read_kib,
            e.read_source,
            e.tlb_pages,
            e.tlb_source,
            if f.all_cpus.value { ", on every CPU" } else { "" },
            stats::bytes(e.read_kib * 1024 + e.tlb_pages * 64),
            f.kib.value,
            f.kib.origin(),
            f.kib.value
        );
    } else if f.any_operand_flushed {
        let _ = writeln!(
            s,
            "  flush: {} {} KiB ({}){}; after it the program's code is read back (operands cold, code hot, \
             as in a loop of the application; --cold-code leaves it cold)",
            f.method.value.spelling(),
            f.kib.value,
            f.kib.origin(),
            if f.all_cpus.value && t.threads.value > 1 {
                ", on every CPU (the routine's threads leave operands in each CPU's caches)"
            } else if f.all_cpus.value {
                ", on every CPU"
            } else {
                ""
            }
        );
    } else if f.method.value == FlushMethod::None {
        let _ = writeln!(
            s,
            "  flush: none (flushing is off, so the operands, the driver's own code and the routine's stay cached)"
        );
    } else {
        let _ = writeln!(
            s,
            "  flush: none before the calls (no operand is marked `flush`, so the driver's own code and the routine's stay cached; `tdg run --flush {}` flushes the unmarked ones)",
            f.method.value.spelling()
        );
    }
    let _ = writeln!(
        s,
        "  one untimed call before timing, made before any flush (instruction pages)"
    );
    let _ = writeln!(
        s,
        "  code: `{}` starts {} bytes past a 4096-byte boundary ({}), whatever the size of the driver's own code; \
         its address modulo 4096 in the application (`code_offset=` in timer={{...}}, --code-offset) times it as placed there",
        m.routine.symbol,
        t.code_offset.value,
        t.code_offset.origin()
    );
    match &m.guard.alternate {
        Some(a) => {
            let _ = writeln!(s, "  overflow guard: the sign of {a} flips each time the working sets wrap; outputs restored before every sample; outputs checked for overflow and denormals after timing");
        }
        None => {
            let _ = writeln!(s, "  overflow guard: outputs restored before every sample (the working sets it uses); outputs checked for overflow and denormals after timing");
        }
    }
    let pins = t
        .pin_cpus
        .value
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if t.threads.value > 1 {
        let _ = writeln!(
            s,
            "  threads: {} ({}); OpenMP's team size is set (omp_set_num_threads, when the implementation is built with -fopenmp) and exported as OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for other runtimes;              thread k pinned to {}; the team is started (one parallel region) before timing;              the operands' pages are first written {}; CPU time is refused; the report counts the threads that really ran",
            t.threads.value,
            t.threads.origin(),
            if pins.is_empty() {
                "the k-th CPU the driver may use (its affinity mask)".to_string()
            } else {
                format!("the k-th of CPUs {pins}")
            },
            if t.first_touch_threads.value {
                "by the threads that use them, each its static share"
            } else {
                "by the main thread (--first-touch main)"
            }
        );
    } else {
        let _ = writeln!(
            s,
            "  threads: 1 ({}); OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set to 1",
            t.threads.origin()
        );
        if !pins.is_empty() {
            let _ = writeln!(s, "  pinned to CPU {pins}");
        }
    }
    if let Some(fl) = &m.flop {
        let v = fl
            .value
            .map(|v| format!(" = {v:.0} per call"))
            .unwrap_or_default();
        let _ = writeln!(s, "  flops: {}{v} (evaluated in double)", fl.text);
    }
    match &m.verify {
        Some(v) => {
            let what = if v.operands.is_empty() {
                "the return value".to_string()
            } else {
                v.operands.join(", ")
            };
            let _ = writeln!(
                s,
                "  verification: {what} compared with the spec's reference body, relative tolerance {:e}",
                v.tolerance
            );
        }
        None => {
            let _ = writeln!(s, "  verification: none (no routine body / returns(...))");
        }
    }
    s
}

/// Where the sampling budget came from: one source, or each setting's.
fn sampling_origins(t: &crate::model::TimingPlan) -> String {
    let b = &t.sampling;
    let all = [
        b.min_time_ms.source,
        b.max_time_ms.source,
        b.stable_pct.source,
    ];
    if all.iter().all(|s| *s == all[0]) {
        return all[0].describe().to_string();
    }
    format!(
        "min_time: {}, max_time: {}, stable: {}",
        b.min_time_ms.source, b.max_time_ms.source, b.stable_pct.source
    )
}

#[cfg(test)]
mod tests {
    use crate::{DriverConfig, DriverModel, MachineDefaults};

    #[test]
    fn a_scalar_without_init_is_explained_as_one() {
        let src = "routine=void f(const int n, const double alpha, double* X);\ninit={ X=Vector(double, 0, _, n); };\n";
        let spec = spec_lang::check_source(src, "t.spec", &[]).unwrap();
        let cfg = DriverConfig::new(MachineDefaults::fixed_for_tests());
        let text = super::explain(&DriverModel::from_checked(&spec, &cfg).unwrap());
        assert!(
            text.contains(
                "alpha (double) = 1: fixed for every call\n      no init in the spec: set to 1"
            ),
            "{text}"
        );
    }
}
