//! The profile meets the timing driver: a call context recorded by
//! `instrument` timed with the spec's generated driver (its `-D` overrides
//! select the context), for `tdg run --contexts`, `tdg validate` and a
//! search scored over the program's contexts (`tune`).

use crate::{build_driver, RunError, RunOptions, RunReport};
use instrument::contexts::{self, CacheState, ContextEntry, ContextsFile, Prediction};
use instrument::report::Report;
use instrument::validate::{self, Validation};
use spec_lang::ast::FlushMethod;
use spec_lang::CheckedSpec;
use std::path::Path;

/// The driver options that time `ctx`: `base` with the context's `-D`
/// values (over the user's for the same macro: the context is the point),
/// its threads unless the user chose a count, and in `cache` (a warm
/// context unflushed; a flushed one with the user's flush, else a read
/// flush; `None`: the spec's own).
pub fn options_for(base: &RunOptions, ctx: &ContextEntry, cache: Option<CacheState>) -> RunOptions {
    let mut o = base.clone();
    if o.timing.threads.is_none() {
        o.timing.threads = ctx.threads.map(u32::from);
    }
    o.defines.retain(|(k, _)| !ctx.defines.contains_key(k));
    o.defines
        .extend(ctx.defines.iter().map(|(k, v)| (k.clone(), v.clone())));
    match cache {
        None => {}
        Some(CacheState::Warm) => o.timing.flush = Some(FlushMethod::None),
        Some(CacheState::Flushed) => {
            if matches!(o.timing.flush, None | Some(FlushMethod::None)) {
                o.timing.flush = Some(FlushMethod::Read);
            }
        }
    }
    o
}

/// Builds and runs the driver for one context.
pub fn time_context(
    spec: &CheckedSpec,
    impl_c: &Path,
    base: &RunOptions,
    ctx: &ContextEntry,
) -> Result<RunReport, RunError> {
    let o = options_for(base, ctx, None);
    build_driver(spec, impl_c, &o)?.run(&o)
}

/// Per-call time a prediction multiplies by the call count: the statistic
/// the driver reports (`--select`; the minimum by default, since on a
/// shared machine other activity only ever adds time to a sample).
pub fn per_call_ns(r: &RunReport) -> f64 {
    r.reported_ns
}

/// `tdg run SPEC --impl IMPL --contexts FILE`: times the top `top` contexts
/// with the driver configured by `base` and predicts the in-app total.
pub fn predict_with_driver(
    spec: &CheckedSpec,
    impl_c: &Path,
    base: &RunOptions,
    file: &ContextsFile,
    top: usize,
) -> Result<Prediction, RunError> {
    contexts::predict(file, top, |ctx| {
        time_context(spec, impl_c, base, ctx).map(|r| per_call_ns(&r))
    })
}

/// The driver's per-call samples for one context, warm (no flush) and
/// flushed (`base.flush`, or a read flush of the last-level cache).
pub struct WarmAndFlushed {
    pub warm: RunReport,
    pub flushed: RunReport,
}

pub fn time_warm_and_flushed(
    spec: &CheckedSpec,
    impl_c: &Path,
    base: &RunOptions,
    ctx: &ContextEntry,
) -> Result<WarmAndFlushed, RunError> {
    let warm = options_for(base, ctx, Some(CacheState::Warm));
    let flushed = options_for(base, ctx, Some(CacheState::Flushed));
    Ok(WarmAndFlushed {
        warm: build_driver(spec, impl_c, &warm)?.run(&warm)?,
        flushed: build_driver(spec, impl_c, &flushed)?.run(&flushed)?,
    })
}

/// In-app per-call times of the context ranked `rank`, in call order.
pub fn in_app_samples(report: &Report, rank: usize) -> Vec<f64> {
    report
        .timeline
        .iter()
        .filter(|(_, r)| *r == rank)
        .map(|(ns, _)| *ns)
        .collect()
}

/// `tdg validate`: one context, in-app vs warm and flushed driver runs.
pub fn validate_context(
    spec: &CheckedSpec,
    impl_c: &Path,
    base: &RunOptions,
    report: &Report,
    file: &ContextsFile,
    rank: usize,
) -> Result<(Validation, WarmAndFlushed), ValidateError> {
    let ctx = file
        .contexts
        .iter()
        .find(|c| c.rank == rank)
        .ok_or(ValidateError::NoContext {
            rank,
            count: file.contexts.len(),
        })?;
    let runs = time_warm_and_flushed(spec, impl_c, base, ctx)?;
    if runs.warm.samples_ns.is_empty() || runs.flushed.samples_ns.is_empty() {
        return Err(ValidateError::NoSamples);
    }
    let app = in_app_samples(report, rank);
    let v = validate::compare(
        &ctx.label(),
        &app,
        report.early_calls,
        &runs.warm.stats,
        &runs.flushed.stats,
    )
    .ok_or(ValidateError::NoSamples)?;
    Ok((v, runs))
}

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("there is no context of rank {rank}: the profile has {count}; pick one with --rank 1..={count}")]
    NoContext { rank: usize, count: usize },
    #[error(
        "no samples to compare (the context has no recorded call or the driver returned none)"
    )]
    NoSamples,
    #[error(transparent)]
    Driver(#[from] RunError),
}
