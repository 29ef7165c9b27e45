//! `tdg_timing.h`, the one C timing layer: the serialised cycle-counter
//! reads, the fallback clock, the decision whether the cycle counter can be
//! trusted, and the empty-interval cost. Every C runtime tdg ships includes
//! it (the driver runtime in `templates/`, `instrument/c/`, `checkpoint/c/`,
//! `probe/c/`); each runtime's writer puts it beside the runtime with
//! [`write_header`].
//!
//! The invariance decision lives in the header alone. Rust code that needs
//! it (`tdg doctor`) builds a one-line program with the header and reads
//! its answer ([`tsc_verdict`]) instead of parsing /proc/cpuinfo.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use toolchain::{CCompiler, CompileJob, ToolchainError};

/// The name every runtime includes it by (`#include "tdg_timing.h"`).
pub const HEADER_NAME: &str = "tdg_timing.h";
/// The header's text.
pub const HEADER: &str = include_str!("../c/tdg_timing.h");

/// Writes the header into `dir`, which the caller has claimed (an
/// `fsguard::OwnedDir` or a scratch directory); returns its path.
pub fn write_header(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join(HEADER_NAME);
    fsguard::write_atomic(&path, HEADER.as_bytes())?;
    Ok(path)
}

/// Whether this machine's cycle counter times intervals, as the header
/// decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TscVerdict {
    /// Invariant, with rdtscp: the runtimes time with the serialised reads.
    Usable,
    /// Why not; the runtimes time with the fallback clock.
    Unusable(String),
}

const VERDICT_PROGRAM: &str = r#"#define _GNU_SOURCE
#include <stdio.h>
#include "tdg_timing.h"

int main(void)
{
    const char *why = tdg_tsc_unusable_reason();
    if (why == NULL)
        puts("usable");
    else
        printf("unusable %s\n", why);
    return 0;
}
"#;

/// Builds and runs a program with the header and returns its verdict.
pub fn tsc_verdict(cc: &CCompiler) -> Result<TscVerdict, ToolchainError> {
    let scratch = toolchain::scratch_dir("tdg-tsc-verdict").map_err(ToolchainError::Files)?;
    let dir = scratch.path();
    write_header(dir).map_err(ToolchainError::Files)?;
    let source = dir.join("verdict.c");
    std::fs::write(&source, VERDICT_PROGRAM).map_err(ToolchainError::Files)?;
    let exe = dir.join("verdict");
    cc.compile(&CompileJob {
        sources: vec![source],
        output: exe.clone(),
        cflags: vec!["-O1".into()],
        include_dirs: vec![dir.to_path_buf()],
        ..Default::default()
    })?;
    let out = toolchain::run(&mut Command::new(&exe), Some(Duration::from_secs(30)))?;
    Ok(parse_verdict(&out.stdout))
}

fn parse_verdict(stdout: &str) -> TscVerdict {
    let line = stdout.lines().next().unwrap_or("").trim();
    match line.strip_prefix("unusable ") {
        _ if line == "usable" => TscVerdict::Usable,
        Some(why) => TscVerdict::Unusable(why.to_string()),
        None => TscVerdict::Unusable(format!("the verdict program printed {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_lines_parse() {
        assert_eq!(parse_verdict("usable\n"), TscVerdict::Usable);
        assert_eq!(
            parse_verdict("unusable the CPU has no rdtscp\n"),
            TscVerdict::Unusable("the CPU has no rdtscp".into())
        );
        assert!(matches!(parse_verdict(""), TscVerdict::Unusable(_)));
    }
}
