//! A re-timing's rounds run the drivers its first round built: the same
//! configurations are not rendered, compiled and linked again each round.
//! The compiler logs every call (testkit), so the test counts what really
//! ran.

use config::Config;
use std::path::Path;
use tune::search::Objective;

fn config(k: i64) -> Config {
    Config::from_pairs([("TDG_TEST_K", k)]).unwrap()
}

#[test]
fn a_retimings_rounds_build_each_configuration_once() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let cc = testkit::LoggedCompiler::new(dir.path());
    let specs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let spec = spec_lang::load(specs.join("axpy.spec"), &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut base = driver_gen::RunOptions {
        cc: Some(cc.program()),
        // No build cache: every build compiles, so a build shows in the log.
        build_cache: None,
        ..Default::default()
    };
    base.timing.min_time_ms = Some(1);
    base.timing.max_time_ms = Some(2);
    let mut objective = tune::objectives::driver_objective(&spec, &specs.join("axpy.c"), &base);
    let calls = || cc.calls().len();
    let round = [config(1), config(2)];
    for r in objective.retime_once(&round) {
        r.unwrap();
    }
    let first = calls();
    assert!(first > 0, "the first round built nothing");
    for _ in 0..2 {
        for r in objective.retime_once(&round) {
            r.unwrap();
        }
        assert_eq!(
            calls(),
            first,
            "a later round of the same configurations compiled"
        );
    }
    // A new configuration is built; the one the last round had is not.
    for r in objective.retime_once(&[config(2), config(3)]) {
        r.unwrap();
    }
    let third: Vec<String> = cc.calls().into_iter().skip(first).collect();
    assert!(
        !third.is_empty() && third.iter().all(|l| !l.contains("TDG_TEST_K=2")),
        "{third:#?}"
    );
    assert!(
        third.iter().any(|l| l.contains("TDG_TEST_K=3")),
        "{third:#?}"
    );
}
