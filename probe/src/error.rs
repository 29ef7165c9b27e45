//! What can stop a probe, each said with its cause and the way out.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The toolchain's own message already says what failed and how to fix it.
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error("the `{mode}` micro-benchmark printed an unreadable line `{line}`")]
    Output { mode: String, line: String },
    #[error("the cache-latency curve shows no cache level (all {points} points in one cluster); the machine may be too loaded to probe, retry when it is idle")]
    NoCacheLevels { points: usize },
    #[error("probe cache {path}: {cause}; delete it or set TDG_CACHE_DIR to a directory only you can write")]
    CacheFile {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("no probe result at {path}, and probing is off (TDG_NO_PROBE); run `tdg probe` once, or unset TDG_NO_PROBE")]
    ProbingOff { path: PathBuf },
    #[error("probe scratch files: {0}")]
    Io(std::io::Error),
}
