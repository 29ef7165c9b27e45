//! What the output-format tests share: the tdg binary, the repository, and
//! the tuners' Python environment scripts/setup.d/70-tuners.sh installs.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn support(file: &str) -> PathBuf {
    repo().join("tests/formats_support").join(file)
}

/// `tdg ARGS` with extra environment variables.
pub fn tdg(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tdg"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The tests' own Python with Optuna and Kernel Tuner.
pub fn tuners_python() -> PathBuf {
    let deps = std::env::var_os("TDG_DEPS").map_or(repo().join(".deps"), PathBuf::from);
    let python = deps.join("tuners-venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup (step 70-tuners.sh)",
        python.display()
    );
    python
}
