//! What the probe's micro-benchmark programs print: one row of
//! whitespace-separated words per line, read the same way for both
//! programs (`microbench.c` and `cpubench.c`).

use crate::error::ProbeError;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs `exe` with `args` (stopped after `limit`) and splits its output
/// into rows of words, blank lines left out.
pub(crate) fn run_rows(
    exe: &Path,
    args: &[String],
    limit: Duration,
) -> Result<Vec<Vec<String>>, ProbeError> {
    let out = toolchain::run(Command::new(exe).args(args), Some(limit))?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect())
}

/// Word `i` of `row` as a number; a row without one is the program's
/// output error, naming the mode and the line.
pub(crate) fn num<T: std::str::FromStr>(
    mode: &str,
    row: &[String],
    i: usize,
) -> Result<T, ProbeError> {
    row.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ProbeError::Output {
            mode: mode.into(),
            line: row.join(" "),
        })
}
