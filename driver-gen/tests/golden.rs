//! One generated driver, committed: `tests/golden/axpy/` holds what
//! `tdg gen specs/axpy.spec` renders on a fixed machine (driver.c and the
//! Makefile), so a template or model change shows up in review as a diff of
//! the C a user gets. The runtime is not rendered: the test checks it is
//! `templates/tdg_runtime.{c,h}` and `c-timing/c/tdg_timing.h` byte for
//! byte, so its review is those files'.
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

/// The plain-C runtime, copied into every driver unrendered: (name, where
/// it lives in the repository).
const RUNTIME: [(&str, &str); 3] = [
    ("tdg_runtime.c", "templates/tdg_runtime.c"),
    ("tdg_runtime.h", "templates/tdg_runtime.h"),
    ("tdg_timing.h", "c-timing/c/tdg_timing.h"),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn generated_axpy_driver_matches_the_committed_one() {
    let spec = spec_lang::load(repo().join("specs/axpy.spec"), &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|d| panic!("{d}"));
    let model = DriverModel::from_checked(&spec, &DriverConfig::new(machine())).unwrap();
    let generated = render(&model, None).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/axpy");
    let (copied, rendered): (Vec<_>, Vec<_>) = generated
        .files
        .iter()
        .partition(|(name, _)| RUNTIME.iter().any(|(r, _)| r == name));
    assert_eq!(
        copied.len(),
        RUNTIME.len(),
        "{:?}",
        generated.files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (name, text) in &copied {
        let (_, path) = RUNTIME.iter().find(|(r, _)| r == name).unwrap();
        let source = std::fs::read_to_string(repo().join(path)).unwrap();
        assert!(
            *text == source,
            "{name} differs from {path}: the runtime must be copied as it is"
        );
    }
    let bless = std::env::var_os("TDG_BLESS").is_some_and(|v| v != "0");
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &rendered {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, text) in &rendered {
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
