//! The probe's micro-benchmarks are tdg's own sources, the same on every
//! probe: a second probe takes their compiled code from the build cache
//! and only links it. The compiler logs each call (testkit), so the test
//! counts what really ran.

#[test]
fn a_second_probe_compiles_no_micro_benchmark() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let cc = testkit::LoggedCompiler::new(dir.path());
    let opts = probe::ProbeOptions {
        cc: Some(cc.program()),
        build_cache: Some(dir.path().join("builds")),
        ..Default::default()
    };
    let compiles = || cc.calls().iter().filter(|l| l.contains(" -c ")).count();
    drop(probe::Benches::build(&opts).unwrap());
    let first = compiles();
    assert!(first >= 1, "the first build compiled nothing");
    drop(probe::Benches::build(&opts).unwrap());
    assert_eq!(compiles(), first, "the second build compiled again");
}
