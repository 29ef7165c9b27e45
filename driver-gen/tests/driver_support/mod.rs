//! Shared helpers for the driver tests: build a driver from spec text and C
//! source written into a temporary directory.
#![allow(dead_code)]

use driver_gen::{build_driver, BuiltDriver, RunError, RunOptions, RunReport};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[allow(unused_imports)]
pub use testkit::{exclusive, have, repo, usable_cpus};

pub fn spec(src: &str) -> spec_lang::CheckedSpec {
    match spec_lang::check_source(src, "test.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
    {
        Ok(s) => s,
        Err(d) => panic!("test spec does not parse:\n{d}"),
    }
}

/// Options for tests: few samples, a generous timeout.
pub fn opts() -> RunOptions {
    RunOptions {
        timing: driver_gen::TimingOverrides {
            samples: Some(5),
            ..Default::default()
        },
        timeout: Duration::from_secs(120),
        // Probe-grounded flush and interval, as `tdg run` uses.
        machine: Some(driver_gen::machine_defaults()),
        ..RunOptions::default()
    }
}

pub struct Kit {
    pub dir: tempfile::TempDir,
    pub built: BuiltDriver,
}

pub fn try_build(spec_src: &str, impl_src: &str, o: &RunOptions) -> Result<Kit, RunError> {
    let dir = tempfile::tempdir().unwrap();
    let impl_c = dir.path().join("impl.c");
    std::fs::write(&impl_c, impl_src).unwrap();
    let built = build_driver(&spec(spec_src), &impl_c, o)?;
    Ok(Kit { dir, built })
}

pub fn build(spec_src: &str, impl_src: &str, o: &RunOptions) -> Kit {
    match try_build(spec_src, impl_src, o) {
        Ok(k) => k,
        Err(e) => panic!("driver build failed: {e}"),
    }
}

impl Kit {
    pub fn run(&self, o: &RunOptions) -> RunReport {
        match self.built.run(o) {
            Ok(r) => r,
            Err(e) => panic!("driver run failed: {e}"),
        }
    }

    /// Smallest reported figure over `n` runs: robust against a noisy,
    /// shared machine (noise only ever adds time).
    pub fn min_of(&self, o: &RunOptions, n: usize) -> f64 {
        (0..n)
            .map(|_| self.run(o).reported_ns)
            .fold(f64::INFINITY, f64::min)
    }

    /// Runs the driver binary directly and returns (stdout, stderr).
    pub fn run_raw(&self, args: &[&str]) -> (String, String) {
        let out = std::process::Command::new(&self.built.exe)
            .args(args)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }
}

pub fn spec_path(name: &str) -> PathBuf {
    repo().join("specs").join(name)
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// The dot product spec used by the cache tests: N doubles per operand.
pub const DOT_SPEC: &str = r#"
routine=double ddot(const int N, const double* X, const double* Y);
init={
  N=Macro(NS, 16384);
  X=Vector(double, RANDOM, flush|align(64), N);
  Y=Vector(double, RANDOM, flush|align(64), N);
};
flop="2*N";
"#;

pub fn dot_impl() -> String {
    std::fs::read_to_string(repo().join("specs/dot.c")).unwrap()
}
