//! A library never starts a machine probe behind its caller's back: without
//! machine defaults in its options it reads what is recorded, and measures
//! nothing. (Its own process, so the per-process caches start empty.)

use driver_gen::RunOptions;

#[test]
fn run_options_without_machine_defaults_read_sysfs_and_start_no_probe() {
    let cache = tempfile::tempdir().unwrap();
    std::env::set_var("TDG_CACHE_DIR", cache.path());
    std::env::remove_var("TDG_NO_PROBE");
    let start = std::time::Instant::now();
    let cfg = RunOptions::default().driver_config();
    // A probe takes tens of seconds and writes probe.json; neither happened.
    assert!(
        start.elapsed().as_secs_f64() < 5.0,
        "took {:?}",
        start.elapsed()
    );
    assert!(
        std::fs::read_dir(cache.path()).unwrap().next().is_none(),
        "something was written to the probe cache"
    );
    assert!(
        !cfg.machine.caches_source.starts_with("tdg probe"),
        "{}",
        cfg.machine.caches_source
    );
    assert_eq!(cfg.machine.full_flush_kib, None);
}
