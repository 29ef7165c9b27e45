//! The probe's micro-benchmarks are tdg's own sources, the same on every
//! probe: a second probe takes their compiled code from the build cache
//! and only links it. The compiler is a wrapper that logs each call, so
//! the test counts what really ran.

use std::os::unix::fs::PermissionsExt;

#[test]
fn a_second_probe_compiles_no_micro_benchmark() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cc.log");
    let wrapper = dir.path().join("cc-logged");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec cc \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let opts = probe::ProbeOptions {
        cc: Some(wrapper.display().to_string()),
        build_cache: Some(dir.path().join("builds")),
        ..Default::default()
    };
    let compiles = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" -c "))
            .count()
    };
    drop(probe::Benches::build(&opts).unwrap());
    let first = compiles();
    assert!(first >= 1, "the first build compiled nothing");
    drop(probe::Benches::build(&opts).unwrap());
    assert_eq!(compiles(), first, "the second build compiled again");
}
