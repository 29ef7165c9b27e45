//! Shared helpers for the command-line interposition tests (interpose_*):
//! deterministic inputs, Debian's bzip2 profiled through its
//! two-line spec.
#![allow(dead_code)]

use crate::support::tdg_command;
use std::path::Path;
pub use testkit::deps_dir;

/// Deterministic text of `bytes` bytes: words from a small vocabulary in a
/// pseudo-random order, compressible like prose.
pub fn text_input(path: &Path, bytes: usize) {
    let words = [
        "tuning",
        "driver",
        "kernel",
        "cache",
        "matrix",
        "vector",
        "block",
        "sort",
        "the",
        "of",
        "and",
        "profile",
        "checkpoint",
        "restore",
        "timing",
        "bzip2",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push_str(words[(state % words.len() as u64) as usize]);
        out.push(if state.is_multiple_of(11) { '\n' } else { ' ' });
    }
    std::fs::write(path, out).unwrap();
}

/// Debian's interpreter by path (not a virtualenv's or pyenv's), with
/// python3-numpy from scripts/setup.d/45-python-numpy.sh.
pub const PYTHON: &str = "/usr/bin/python3";

/// `PYTHON script.py` run plainly in `dir`; asserts it succeeded and
/// returns its output (what a profiled or captured run must reproduce).
pub fn plain_python_run(dir: &Path) -> std::process::Output {
    let plain = std::process::Command::new(PYTHON)
        .arg("script.py")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "python3-numpy missing? run scripts/setup: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    plain
}

/// zlib 1.2.13 built from Debian's source by
/// scripts/setup.d/40-profile-apps.sh: `minigzipsh` linked against the
/// `libz.so` beside it (run it with LD_LIBRARY_PATH set to this directory).
pub fn zlib_dir() -> std::path::PathBuf {
    let dir = deps_dir().join("zlib");
    assert!(
        dir.join("minigzipsh").is_file() && dir.join("kernel/crc32.c").is_file(),
        "zlib is not built in {}: run `bash scripts/setup` first",
        dir.display()
    );
    dir
}

/// The two-line spec of libbz2's block sort (instrument/examples/bzip2).
pub fn bz2_blocksort_spec() -> String {
    testkit::repo()
        .join("instrument/examples/bzip2/BZ2_blockSort.spec")
        .display()
        .to_string()
}

/// `tdg profile --spec BZ2_blockSort.spec -o bz.tdgp -- /bin/bzip2 -9 -c
/// INPUT` in `dir`, bzip2's output to `stdout`; asserts success and
/// returns the profile.
pub fn profile_bzip2(
    dir: &Path,
    input: &Path,
    stdout: std::process::Stdio,
) -> instrument::format::Profile {
    let spec = bz2_blocksort_spec();
    let out = tdg_command()
        .args([
            "profile",
            "--spec",
            &spec,
            "-o",
            "bz.tdgp",
            "--",
            "/bin/bzip2",
            "-9",
            "-c",
        ])
        .arg(input)
        .current_dir(dir)
        .stdout(stdout)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    instrument::format::read(&dir.join("bz.tdgp")).unwrap()
}
