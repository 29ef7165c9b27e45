//! One generated driver, committed: `tests/golden/axpy/` holds what
//! `tdg gen specs/axpy.spec` writes on a fixed machine, so a template or
//! model change shows up in review as a diff of the C a user gets.
//!
//! After an intended change: `TDG_BLESS=1 cargo test -p driver-gen --test golden`.

use driver_gen::{render, DriverConfig, DriverModel, MachineDefaults};
use std::path::{Path, PathBuf};

/// Fixed machine facts, so the golden files do not depend on where the test
/// runs (a probe-measured flush differs from machine to machine).
fn machine() -> MachineDefaults {
    MachineDefaults {
        caches_source: "golden test machine".into(),
        min_interval_source: "golden test machine".into(),
        full_flush_kib: Some(98304),
        full_flush_source: "golden test machine".into(),
        ..MachineDefaults::fixed_for_tests()
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn generated_axpy_driver_matches_the_committed_one() {
    let spec = spec_lang::load(repo().join("specs/axpy.spec")).unwrap_or_else(|d| panic!("{d}"));
    let model = DriverModel::from_spec(&spec, &DriverConfig::new(machine())).unwrap();
    let generated = render(&model, None).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/axpy");
    let bless = std::env::var_os("TDG_BLESS").is_some_and(|v| v != "0");
    if bless {
        generated.write_to(&dir).unwrap();
    }
    let mut stale = Vec::new();
    for (name, text) in &generated.files {
        let committed = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        if committed != *text {
            let line = committed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or_else(
                    || committed.lines().count().min(text.lines().count()) + 1,
                    |i| i + 1,
                );
            stale.push(format!("{name} (first difference at line {line})"));
        }
    }
    assert!(
        stale.is_empty(),
        "the generated driver differs from driver-gen/tests/golden/axpy: {}; if the change is intended, refresh with `TDG_BLESS=1 cargo test -p driver-gen --test golden` and review the diff",
        stale.join(", ")
    );
}
