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
    build_marked_with(dir, src, &[])
}

/// [`build_marked`] with more compiler flags (`-fopenmp`).
pub fn build_marked_with(dir: &Path, src: &str, flags: &[&str]) -> PathBuf {
    let rt = runtime::build(&cc(), &dir.join("rt"), None).unwrap();
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
        ]
        .into_iter()
        .chain(flags.iter().map(|f| f.to_string()))
        .collect(),
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
