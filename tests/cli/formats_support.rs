//! What the output-format tests share: their kernels in tests/formats_support
//! and the tuners' Python environment scripts/setup.d/70-tuners.sh installs.

#![allow(dead_code)]

use std::path::PathBuf;
use testkit::{deps_dir, repo};

pub fn support(file: &str) -> PathBuf {
    repo().join("tests/formats_support").join(file)
}

/// The tests' own Python with Optuna and Kernel Tuner.
pub fn tuners_python() -> PathBuf {
    let python = deps_dir().join("tuners-venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup (step 70-tuners.sh)",
        python.display()
    );
    python
}
