//! Shared helpers for the profiling-runtime tests: build real C programs
//! against the real runtime.
#![allow(dead_code)]

use instrument::runtime;
use std::path::{Path, PathBuf};
use toolchain::{CCompiler, CompileJob};

pub fn cc() -> CCompiler {
    CCompiler::find(None).expect("a C compiler (scripts/setup installs gcc)")
}

/// Builds the runtime into `dir` and a marker-instrumented program from `src`.
pub fn build_marked(dir: &Path, src: &str) -> PathBuf {
    let rt = runtime::build(&cc(), &dir.join("rt")).unwrap();
    let c = dir.join("app.c");
    std::fs::write(&c, src).unwrap();
    let exe = dir.join("app");
    cc().compile(&CompileJob {
        sources: vec![c],
        output: exe.clone(),
        cflags: vec![
            "-O2".into(),
            "-Wall".into(),
            "-Wextra".into(),
            "-Werror".into(),
        ],
        include_dirs: vec![rt.include_dir.clone()],
        link_args: vec![rt.static_lib.display().to_string(), "-lpthread".into()],
        ..Default::default()
    })
    .unwrap();
    exe
}

/// `host_src` linked against a shared library built from the C file
/// `kernel`, the way a routine sits in a real application's library (found at
/// run time through an rpath). The host's source stays in `dir` as `host.c`;
/// returns the host executable.
pub fn build_host_with_shared_kernel(dir: &Path, kernel: &Path, host_src: &str) -> PathBuf {
    let lib = dir.join("libkernel.so");
    cc().compile(&CompileJob {
        sources: vec![kernel.to_path_buf()],
        output: lib,
        cflags: vec!["-O2".into(), "-fPIC".into(), "-shared".into()],
        ..Default::default()
    })
    .unwrap();
    let host_c = dir.join("host.c");
    std::fs::write(&host_c, host_src).unwrap();
    let host = dir.join("host");
    cc().compile(&CompileJob {
        sources: vec![host_c],
        output: host.clone(),
        cflags: vec!["-O2".into()],
        link_args: vec![
            format!("-L{}", dir.display()),
            "-lkernel".into(),
            format!("-Wl,-rpath,{}", dir.display()),
        ],
        ..Default::default()
    })
    .unwrap();
    host
}

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

/// `tdg ARGS` run in `dir`, output captured.
pub fn tdg_in(args: &[&str], dir: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tdg"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The JSON a successful tdg command printed (fails the test with its
/// stderr otherwise).
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The two-line spec of libbz2's block sort (instrument/examples/bzip2).
pub fn bz2_blocksort_spec() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tdg"))
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
