//! `tdg explain`: the driver model in words. Built from the same model the
//! templates render, so the explanation cannot drift from the driver.

use crate::cexpr;
use crate::model::{CacheState, DriverModel, FlushPlan, Storage};
use crate::render::ScalarKindView;
use handlebars::Handlebars;
use serde::Serialize;
use spec_lang::ast::{FlushMethod, TimerMethod};
use spec_lang::vocabulary::Keyword;
use std::sync::OnceLock;

/// `800000 bytes (781 KiB)`: the exact count, and the short form.
fn bytes_text(b: u64) -> String {
    if b >= 1 << 10 {
        format!("{b} bytes ({})", stats::bytes(b))
    } else {
        format!("{b} bytes")
    }
}

/// What `tdg explain` says, as the template lays it out
/// (`explain.txt.hbs`): every line a field of the model in words.
#[derive(Serialize)]
struct ExplainView {
    routine: String,
    symbol: String,
    scalars: Vec<ScalarLine>,
    operands: Vec<OperandLines>,
    timing: TimingLines,
}

#[derive(Serialize)]
struct ScalarLine {
    name: String,
    ctype: String,
    /// As the spec writes it.
    text: String,
    /// Its value, when that reads differently from the text.
    value: Option<String>,
    /// How it changes from call to call.
    how: String,
    /// Why a scalar the spec left out has its value.
    implicit: Option<&'static str>,
}

#[derive(Serialize)]
struct OperandLines {
    name: String,
    param_type: String,
    elem_type: String,
    shape: String,
    storage: &'static str,
    bytes: String,
    align: String,
    fill: String,
    /// Its cache state before each timed call, in words.
    cache: String,
    output: bool,
}

#[derive(Serialize)]
struct TimingLines {
    timer: &'static str,
    timer_origin: String,
    selection: &'static str,
    selection_origin: String,
    samples: String,
    min_time_ms: String,
    stable_pct: String,
    max_time_ms: String,
    sampling_origin: String,
    min_interval_ns: String,
    min_interval_origin: String,
    /// The machine's interval is the cycle timer's; another timer's is
    /// derived from its own step.
    interval_from_timer: bool,
    flush: String,
    code_offset: String,
    code_offset_origin: String,
    /// The scalar whose sign flips as the working sets wrap.
    alternate: Option<String>,
    /// More than one thread.
    team: bool,
    threads: String,
    threads_origin: String,
    pinned_to: String,
    first_touch: &'static str,
    pins: String,
    flops: Option<String>,
    verification: String,
}

pub fn explain(m: &DriverModel) -> String {
    let view = ExplainView {
        routine: m.routine.name.clone(),
        symbol: m.routine.symbol.clone(),
        scalars: m.scalars.iter().map(|sc| scalar_line(m, sc)).collect(),
        operands: m.operands.iter().map(|o| operand_lines(m, o)).collect(),
        timing: timing_lines(m),
    };
    template()
        .render("explain", &view)
        .unwrap_or_else(|e| panic!("the explain template: {e}"))
}

fn template() -> &'static Handlebars<'static> {
    static HB: OnceLock<Handlebars<'static>> = OnceLock::new();
    HB.get_or_init(|| {
        let mut hb = Handlebars::new();
        hb.register_escape_fn(handlebars::no_escape);
        hb.register_template_string("explain", include_str!("explain.txt.hbs"))
            .unwrap_or_else(|e| panic!("the explain template: {e}"));
        hb
    })
}

fn scalar_line(m: &DriverModel, sc: &crate::model::ScalarModel) -> ScalarLine {
    let how = match ScalarKindView::of(sc, &m.names.env()) {
        Ok(ScalarKindView::Fixed) => "fixed for every call".to_string(),
        Ok(ScalarKindView::Range { incr_c }) => format!("advances by {incr_c} after each call"),
        Ok(ScalarKindView::Random { lo_c, hi_c }) => {
            format!("redrawn uniformly in [{lo_c}, {hi_c}] for each call")
        }
        Err(e) => format!("changes per call ({e})"),
    };
    ScalarLine {
        name: sc.name.clone(),
        ctype: sc.field_type.text(),
        text: sc.text.clone(),
        value: sc.value.map(|v| v.to_string()).filter(|v| *v != sc.text),
        how,
        implicit: sc.implicit_reason,
    }
}

fn operand_lines(m: &DriverModel, o: &crate::model::OperandModel) -> OperandLines {
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
    let align = if o.misalign > 0 {
        format!(
            "aligned to {} bytes and never to {} (pointer mod {} is a non-zero multiple of {})",
            o.align, o.misalign, o.misalign, o.align
        )
    } else {
        format!("aligned to {} bytes", o.align)
    };
    OperandLines {
        name: o.name.clone(),
        param_type: o.param_type.text(),
        elem_type: o.elem_type.text(),
        shape: o
            .dims
            .iter()
            .map(|d| cexpr::describe(&d.expr))
            .collect::<Vec<_>>()
            .join(" x "),
        storage: match o.storage {
            Storage::Heap => "one heap block",
            Storage::RowPointers => "a row-pointer array with one heap block per row",
            Storage::Static => "static storage",
        },
        bytes,
        align,
        fill: o.fill.text.clone(),
        cache: cache_words(&m.flush, o),
        output: o.is_output,
    }
}

/// An operand's cache state before each timed call.
fn cache_words(f: &FlushPlan, o: &crate::model::OperandModel) -> String {
    let cache = match o.cache {
        CacheState::Flushed => flushed_words(f),
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
    if o.storage == Storage::Static && o.cache == CacheState::Flushed {
        format!(
            "{}; but static storage cannot rotate, so with R > 1 calls per sample it stays at one address (cached after the first call)",
            cache.split("; with R > 1").next().unwrap_or(&cache)
        )
    } else {
        cache
    }
}

/// How a flushed operand leaves the caches before each sample.
fn flushed_words(f: &FlushPlan) -> String {
    match f.method.value {
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
    }
}

fn timing_lines(m: &DriverModel) -> TimingLines {
    let t = &m.timing;
    let pins = t
        .pin_cpus
        .value
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    TimingLines {
        timer: t.method.value.spelling(),
        timer_origin: t.method.origin().to_string(),
        selection: t.selection.value.spelling(),
        selection_origin: t.selection.origin().to_string(),
        samples: t.samples.value.to_string(),
        min_time_ms: t.sampling.min_time_ms.value.to_string(),
        stable_pct: t.sampling.stable_pct.value.to_string(),
        max_time_ms: t.sampling.max_time_ms.value.to_string(),
        sampling_origin: sampling_origins(t),
        min_interval_ns: t.min_interval_ns.value.to_string(),
        min_interval_origin: t.min_interval_ns.origin().to_string(),
        interval_from_timer: t.min_interval_is_machine_default()
            && t.method.value != TimerMethod::Cycle,
        flush: flush_words(m),
        code_offset: t.code_offset.value.to_string(),
        code_offset_origin: t.code_offset.origin().to_string(),
        alternate: m.guard.alternate.clone(),
        team: t.threads.value > 1,
        threads: t.threads.value.to_string(),
        threads_origin: t.threads.origin().to_string(),
        pinned_to: if pins.is_empty() {
            "the k-th CPU the driver may use (its affinity mask)".to_string()
        } else {
            format!("the k-th of CPUs {pins}")
        },
        first_touch: if t.first_touch_threads.value {
            "by the threads that use them, each its static share"
        } else {
            "by the main thread (--first-touch main)"
        },
        pins,
        flops: m.flop.as_ref().map(|fl| {
            let v = fl
                .value
                .map(|v| format!(" = {v:.0} per call"))
                .unwrap_or_default();
            format!("{}{v}", fl.text)
        }),
        verification: match &m.verify {
            Some(v) => format!(
                "{} compared with the spec's reference body, relative tolerance {:e}",
                if v.operands.is_empty() {
                    "the return value".to_string()
                } else {
                    v.operands.join(", ")
                },
                v.tolerance
            ),
            None => "none (no routine body / returns(...))".to_string(),
        },
    }
}

/// The flush before the calls, in words.
fn flush_words(m: &DriverModel) -> String {
    let (f, t) = (&m.flush, &m.timing);
    if let (true, Some(e)) = (f.any_operand_flushed, &f.eviction) {
        format!(
            "before each single-call sample, clflush of the flushed operands (out of every cache level, whatever \
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
        )
    } else if f.any_operand_flushed {
        format!(
            "{} {} KiB ({}){}; after it the program's code is read back (operands cold, code hot, \
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
        )
    } else if f.method.value == FlushMethod::None {
        "none (flushing is off, so the operands, the driver's own code and the routine's stay cached)"
            .to_string()
    } else {
        format!(
            "none before the calls (no operand is marked `flush`, so the driver's own code and the routine's stay cached; `tdg run --flush {}` flushes the unmarked ones)",
            f.method.value.spelling()
        )
    }
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
    fn a_team_is_explained_in_one_line_of_single_spaces() {
        let src =
            "routine=void f(const int n, double* X);\ninit={ n=64; X=Vector(double, 0, _, n); };\n";
        let spec = spec_lang::check_source(src, "t.spec", &[]).unwrap();
        let mut cfg = DriverConfig::new(MachineDefaults::fixed_for_tests());
        cfg.timing.threads = Some(2);
        cfg.timing.pin_cpus = vec![0, 1];
        let text = super::explain(&DriverModel::from_checked(&spec, &cfg).unwrap());
        let line = text
            .lines()
            .find(|l| l.starts_with("  threads: 2 (command line)"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.contains(
                "runtimes; thread k pinned to the k-th of CPUs 0, 1; the team is started"
            ),
            "{line}"
        );
        assert!(!line.trim_start().contains("  "), "{line}");
        assert!(
            !text.contains("pinned to CPU"),
            "a team's pins are in its line:\n{text}"
        );
    }

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
