//! Why a driver model cannot be built.

use super::sourced::Source;

/// Why a driver model cannot be built. A checked spec fails here only on
/// facts of the machine or the configuration, or (`Spec`) because it does
/// not serve a driver: the checker's located verdict, printed as it is.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("{0}")]
    Spec(spec_lang::Diagnostics),
    #[error(transparent)]
    Expr(#[from] crate::cexpr::CExprError),
    #[error("flush size level L{0} is not a cache this machine reports (it has {1}); pick one of those or a size in KiB")]
    NoSuchCache(u8, String),
    #[error("--timer cpu cannot time a routine on {threads} threads ({threads_from}): CPU time adds up what every thread spent and hides their waiting; use --timer cycle or --timer wall")]
    CpuTimerThreads { threads: u32, threads_from: Source },
    #[error("{threads} threads ({threads_from}) need a CPU each but --pin lists {pins}; list {threads} CPUs or lower --threads")]
    TooFewPins {
        threads: u32,
        threads_from: Source,
        pins: usize,
    },
    #[error("--pin lists CPU {0} twice; each thread needs a CPU of its own")]
    RepeatedPin(u32),
    #[error("samples must be at least 1")]
    NoSamples,
    #[error("the sampling budget ends ({max} ms, {max_from}) before it starts ({min} ms, {min_from}); raise --max-time-ms or lower --min-time-ms")]
    SamplingBudget {
        min: u64,
        min_from: Source,
        max: u64,
        max_from: Source,
    },
}
