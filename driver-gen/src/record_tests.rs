//! The run record as the driver's line reads into it and tdg settles it:
//! beside both the reader (driver_json) and the record, so neither
//! imports the other for its tests.
use crate::defaults::MachineDefaults;
use crate::model::{DriverConfig, DriverModel, Source, TimingOverrides};
use crate::record::*;
use spec_lang::ast::Selection;

/// A driver's line as a generated dot driver printed it (`--json
/// --samples=3`, unpinned, its flush cost not measured).
const LINE: &str = r#"{"tdg_driver":2,"routine":"ddot","timer":"cycle","timer_requested":"cycle","tsc_hz":2596124353.4090614,"tsc_hz_source":"calibrated","timer_overhead_ns":20.029857172179366,"timer_resolution_ns":20.029857172179366,"mode":"self-flushing","reps":256,"working_sets":22505,"flush":"read","flush_kib":90016,"flush_all_cpus":false,"flush_cpus":[],"flush_clflushes_operands":false,"flush_evict_kib":0,"flush_evict_pages":0,"flush_ns_per_sample":0,"min_interval_ns":65879,"min_interval_why":"","code":"hot","code_page_offset":0,"selection":"min","samples_ns":[497.1081935290687,505.8712560418972,499.8075297495382],"sample_cpus":[0,0,0],"stats":{"min":497.1081935290687,"median":499.8075297495382,"mean":500.9289931068347,"max":505.8712560418972,"stddev":4.487881036441802},"reported_ns":497.1081935290687,"uncertainty_pct":null,"stable":false,"unstable_reason":"3 sample(s) (--samples) are too few to judge stability; drop --samples to sample until the figure settles","sampling":{"adaptive":false,"min_samples":3,"min_time_ms":100,"max_time_ms":250,"stable_pct":0.5,"elapsed_ms":0.39659099999999997},"flops_per_call":512,"page_faults_during_timing":0,"pinned_cpu":-1,"touch_pages":true,"dummy_call":true,"overflow_guard":"restore the outputs of the working sets each sample uses before it; outputs checked for overflow and denormals","threads":1,"threads_requested":1,"openmp":false,"omp_team":0,"thread_cpus":[],"thread_busy_ms":[0.460206],"first_touch":"main","first_touch_faults":[],"outputs_finite":true,"outputs_denormal":0,"operands":[{"name":"X","bytes":2048,"address":93900825446784,"align":64,"misalign":0,"cache":"flushed","copies":22505},{"name":"Y","bytes":2048,"address":93900825448960,"align":64,"misalign":0,"cache":"flushed","copies":22505}],"verification":{"status":"passed","detail":""},"warnings":["other load on the machine: 1-minute load average 5.21 on 2 CPU(s); wall times include it (CPU time, --timer cpu with its median, does not)","the driver is not pinned to a CPU (--pin): migrations can cold-start the caches mid-run"],"sink":-34462.05072239411}"#;

fn plan(timing: TimingOverrides) -> DriverModel {
    let spec = spec_lang::check_source(
        "routine=double ddot(const int N, const double* X, const double* Y);\ninit={ N=Macro(NS, 256); X=Vector(double, RANDOM, flush, N); Y=Vector(double, RANDOM, flush, N); };\n",
        "t.spec",
        &[],
    )
    .unwrap();
    let mut cfg = DriverConfig::new(MachineDefaults::fixed_for_tests());
    cfg.timing = timing;
    DriverModel::from_checked(&spec, &cfg).unwrap()
}

#[test]
fn the_drivers_line_reads_into_the_record_with_its_no_values_as_none() {
    let r = crate::driver_json::parse(LINE).unwrap();
    assert_eq!((r.routine.as_str(), r.reps_per_sample), ("ddot", 256));
    assert_eq!(r.stats.n, 3, "the count is the samples'");
    assert_eq!(r.pinned_cpu, None, "-1: unpinned");
    assert_eq!(r.code_page_offset, Some(0));
    assert_eq!(r.flush_ns_per_sample, None, "0: not measured");
    assert!(r.timer_overhead_ns > 0.0);
    assert_eq!(r.team.thread_busy_ms.len(), 1);
    assert_eq!(r.operands.len(), 2);
    // Nothing of tdg's own yet: the build and the sources are settled.
    assert!(r.compiler.is_empty() && r.sources.is_none());
}

#[test]
fn settling_takes_every_setting_from_the_plan_not_the_drivers_words() {
    let mut r = crate::driver_json::parse(LINE).unwrap();
    let model = plan(TimingOverrides {
        flush_kib: Some(512),
        selection: Some(Selection::Median),
        ..TimingOverrides::default()
    });
    let build = BuildRecord {
        compiler: "cc (test)".into(),
        impl_cflags: vec!["-O2".into()],
        defines: vec!["NS=256".into()],
    };
    r.settle(&build, &model.flush, &model.timing);
    assert_eq!(r.compiler, "cc (test)");
    assert_eq!(r.defines, ["NS=256"]);
    assert_eq!(r.flush_kib, 512, "the plan's, not the line's 90016");
    assert_eq!(r.selection, Selection::Median);
    let sources = r.sources.as_ref().unwrap();
    assert_eq!(sources.flush_kib.source, Source::CommandLine);
    assert_eq!(r.flush_kib_source, sources.flush_kib.to_string());
    assert!(r.reported_why.contains("median"), "{}", r.reported_why);
    // 512 flops per call over the least sample, in MFLOPS.
    assert_eq!(r.mflops_best, Some(512.0 / r.stats.min * 1e3));
}

#[test]
fn tdg_run_json_reads_back_into_the_same_record() {
    let mut r = crate::driver_json::parse(LINE).unwrap();
    let model = plan(TimingOverrides::default());
    r.settle(&BuildRecord::default(), &model.flush, &model.timing);
    let text = serde_json::to_string(&r).unwrap();
    let mut back: RunReport = serde_json::from_str(&text).unwrap();
    // serde_json reads a float back to within its last digit.
    assert!((back.mflops_best.unwrap() / r.mflops_best.unwrap() - 1.0).abs() < 1e-12);
    back.mflops_best = r.mflops_best;
    assert_eq!(back.count_samples(), r);
    // The record writes the contract's names and its none as null.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["reps_per_sample"], 256);
    assert!(v["pinned_cpu"].is_null() && v.get("reps").is_none());
}
