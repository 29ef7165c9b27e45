//! Allocation, page touching, instruction-load warm-up and overflow guard,
//! each proven by what it changes.

mod driver_support;
use driver_gen::{machine_defaults, render, DriverConfig, DriverModel};
use driver_support::*;
use spec_lang::ast::FlushMethod;
use std::process::Command;
use std::time::Duration;
use toolchain::{CCompiler, CompileJob};

const HARNESS: &str = r#"
#include <stdio.h>
#include <string.h>
#include "tdg_runtime.h"
/* Every block stays live until its case ends, so malloc hands out many
 * different base addresses (freeing at once would recycle one chunk and
 * test a single base residue 2000 times). */
static unsigned char *live[2000];
int main(void) {
    static const size_t cases[][2] = {{8, 0}, {16, 0}, {64, 0}, {4096, 0}, {8, 16}, {8, 64}, {16, 64}, {32, 64}, {64, 128}, {24, 64}};
    size_t c, i, bad_align = 0, bad_misalign = 0, total = 0, fewest_offsets = 4096;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t align = cases[c][0], misalign = cases[c][1], offsets = 0;
        static unsigned char seen[4096];
        memset(seen, 0, sizeof seen);
        for (i = 0; i < 2000; i++) {
            size_t size = 1 + (i * 7919) % 5000;
            unsigned char *p = tdg_amalloc(size, align, misalign);
            if (p == NULL) return 1;
            if ((size_t)p % align) bad_align++;
            if (misalign && (size_t)p % misalign == 0) bad_misalign++;
            offsets += !seen[(size_t)p % 4096];
            seen[(size_t)p % 4096] = 1;
            memset(p, 0xab, size); /* the whole block is usable */
            live[i] = p;
            total++;
        }
        for (i = 0; i < 2000; i++)
            tdg_afree(live[i]);
        if (misalign && offsets < fewest_offsets)
            fewest_offsets = offsets;
    }
    printf("total=%zu bad_align=%zu bad_misalign=%zu\n", total, bad_align, bad_misalign);
    printf("fewest_page_offsets=%zu\n", fewest_offsets);
    return 0;
}
"#;

#[test]
fn amalloc_aligns_and_misaligns_over_many_allocations() {
    let _load = testkit::shared();
    let model =
        DriverModel::from_checked(&spec(DOT_SPEC), &DriverConfig::new(machine_defaults())).unwrap();
    let generated = render(&model, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    generated.write_to(dir.path()).unwrap();
    std::fs::write(dir.path().join("harness.c"), HARNESS).unwrap();
    let exe = dir.path().join("harness");
    let cc = CCompiler::find(None).unwrap();
    cc.compile(&CompileJob {
        sources: vec![
            dir.path().join("harness.c"),
            dir.path().join("tdg_runtime.c"),
        ],
        output: exe.clone(),
        // AddressSanitizer would catch a wrong afree or an overrun.
        cflags: vec!["-std=c99".into(), "-O1".into(), "-fsanitize=address".into()],
        link_args: vec!["-lm".into(), "-pthread".into()],
        ..Default::default()
    })
    .unwrap();
    let out = toolchain::run(&mut Command::new(&exe), Some(Duration::from_secs(60))).unwrap();
    let mut lines = out.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("total=20000 bad_align=0 bad_misalign=0"),
        "{}",
        out.stdout
    );
    // The misaligned cases really met many different malloc bases (every
    // residue the step-off logic must handle), not one recycled block.
    let offsets: usize = lines
        .next()
        .and_then(|l| l.strip_prefix("fewest_page_offsets="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no offset count in {}", out.stdout));
    assert!(offsets >= 16, "only {offsets} distinct page offsets");
}

#[test]
fn driver_operands_honour_align_and_misalign() {
    let _load = testkit::shared();
    let spec_src = r#"
routine=double ddot(const int N, const double* X, const double* Y);
init={
  N=1000;
  X=Vector(double, RANDOM, align(64), N);
  Y=Vector(double, RANDOM, align(16)|misalign(64), N);
};
"#;
    let kit = build(spec_src, &dot_impl(), &opts());
    for _ in 0..5 {
        let r = kit.run(&opts());
        assert_eq!(r.operands[0].address % 64, 0);
        assert_eq!(r.operands[1].address % 16, 0);
        assert_ne!(r.operands[1].address % 64, 0);
    }
}

/// Writes every element of a ZERO-filled (calloc'd, untouched) output.
const WRITE_SPEC: &str = r#"
routine=void fill(const int N, double* W);
init={
  N=Macro(NS, 1048576);
  W=Vector(double, ZERO, _, N);
};
"#;
const WRITE_IMPL: &str =
    "void fill(const int N, double *W) { int i; for (i = 0; i < N; i++) W[i] = 1.0; }\n";

#[test]
fn touching_pages_keeps_page_faults_out_of_the_timing() {
    let _load = testkit::shared();
    let mut o = opts();
    o.timing.samples = Some(3);
    o.timing.min_interval_ns = Some(0);
    o.timing.flush = Some(FlushMethod::None);
    o.dummy_call = false; // the warm-up call would also fault the pages in
    o.overflow_guard = false;
    let kit = build(WRITE_SPEC, WRITE_IMPL, &o);
    let touched = kit.run(&o);
    let mut lazy_o = o.clone();
    lazy_o.touch_pages = false;
    let lazy = kit.run(&lazy_o);
    // 8 MiB = 2048 pages of 4 KiB, each faulting on first write.
    eprintln!(
        "page faults while timing: touched {}, untouched {}; first sample {:.0} vs {:.0} ns",
        touched.page_faults_during_timing,
        lazy.page_faults_during_timing,
        touched.samples_ns[0],
        lazy.samples_ns[0]
    );
    assert!(
        touched.page_faults_during_timing < 64,
        "{}",
        touched.page_faults_during_timing
    );
    assert!(
        lazy.page_faults_during_timing >= 1000,
        "{}",
        lazy.page_faults_during_timing
    );
    // (The faults land in the first timed call, the repetition probe, which
    // is why the count, not the samples, is asserted on.)
}

#[test]
fn untimed_warm_up_call_absorbs_the_first_call_cost() {
    let _load = testkit::shared();
    // The first call of this kernel costs ~5 ms extra (like loading its code).
    let spec_src = "routine=void k(const int N);\ninit={ N=1; };\n";
    let imp = r#"
#define _GNU_SOURCE
#include <time.h>
static int first = 1;
void k(const int N) {
    (void)N;
    if (first) {
        struct timespec t0, t1;
        first = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t1);
        while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 5000000L);
    }
}
"#;
    let mut o = opts();
    o.timing.samples = Some(3);
    let kit = build(spec_src, imp, &o);
    let with = kit.run(&o);
    let mut no = o.clone();
    no.dummy_call = false;
    let without = kit.run(&no);
    eprintln!(
        "R with warm-up {}, without {} (probe call paid the 5 ms first-call cost)",
        with.reps_per_sample, without.reps_per_sample
    );
    // The first timed call is the repetition probe. Without the warm-up it
    // pays the first-call cost, looks long, and the driver wrongly times a
    // sub-microsecond routine one call at a time.
    assert!(with.reps_per_sample > 1, "{}", with.reps_per_sample);
    assert_eq!(without.reps_per_sample, 1);
    assert!(with.dummy_call && !without.dummy_call);
}

#[test]
fn warm_up_call_happens_before_any_flush() {
    let _load = testkit::shared();
    let kit = build(DOT_SPEC, &dot_impl(), &opts());
    let out = Command::new(&kit.built.exe)
        .args(["--json", "--samples=1"])
        .env("TDG_TRACE_PHASES", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let pos = |needle: &str| {
        err.find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in {err}"))
    };
    assert!(pos("untimed warm-up call") < pos("preparing the cache flush"));
    assert!(pos("preparing the cache flush") < pos("timing sample 1"));
}

/// y += alpha*x with x = 1e307: overflows after a handful of calls unless
/// the guard flips alpha's sign or restores y.
const ACC_SPEC: &str = r#"
routine=void acc(const int N, const double alpha, const double* X, double* Y);
init={
  N=64; alpha=1;
  X=Vector(double, CONST(1e307), _, N);
  Y=Vector(double, ZERO, _, N);
};
"#;
const ACC_IMPL: &str = "void acc(const int N, const double alpha, const double *X, double *Y) { int i; for (i = 0; i < N; i++) Y[i] += alpha * X[i]; }\n";

#[test]
fn overflow_guard_keeps_repeated_accumulation_finite() {
    let _load = testkit::shared();
    let mut o = opts();
    o.timing.flush = Some(FlushMethod::None);
    let kit = build(ACC_SPEC, ACC_IMPL, &o);
    // Many calls per sample on the same data: alpha alternation.
    let guarded = kit.run(&o);
    assert!(guarded.reps_per_sample > 20);
    assert!(guarded.outputs_finite, "{:?}", guarded.warnings);
    assert!(guarded.overflow_guard.contains("alpha"));
    let mut off = o.clone();
    off.overflow_guard = false;
    let unguarded = kit.run(&off);
    assert!(!unguarded.outputs_finite);
    assert!(unguarded.warnings.iter().any(|w| w.contains("non-finite")));

    // One call per sample: outputs restored before each sample.
    let mut single = o.clone();
    single.timing.min_interval_ns = Some(0);
    single.timing.samples = Some(40);
    let restored = kit.run(&single);
    assert_eq!(restored.reps_per_sample, 1);
    assert!(restored.outputs_finite);
    single.overflow_guard = false;
    assert!(!kit.run(&single).outputs_finite);
}

const ENV_HARNESS: &str = r#"
#include <stdio.h>
#include <string.h>
#include "tdg_runtime.h"
int main(int argc, char **argv) {
    struct tdg_warnings w;
    tdg_warnings_init(&w);
    if (argc > 1 && strcmp(argv[1], "--overfill") == 0) {
        int i;
        for (i = 0; i < 200; i++)
            tdg_warnings_add(&w, "warning %03d: %s", i, "some forty characters of explanation....");
        fputs(w.text, stdout);
        return 0;
    }
    tdg_environment_warnings_in(argc > 1 ? argv[1] : "", &w, argc > 2);
    fputs(w.text, stdout);
    return 0;
}
"#;

#[test]
fn environment_warnings_follow_governor_turbo_and_load() {
    let _load = testkit::shared();
    let model =
        DriverModel::from_checked(&spec(DOT_SPEC), &DriverConfig::new(machine_defaults())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    render(&model, None).unwrap().write_to(dir.path()).unwrap();
    std::fs::write(dir.path().join("env.c"), ENV_HARNESS).unwrap();
    let exe = dir.path().join("env");
    CCompiler::find(None)
        .unwrap()
        .compile(&CompileJob {
            sources: vec![dir.path().join("env.c"), dir.path().join("tdg_runtime.c")],
            output: exe.clone(),
            cflags: vec!["-std=c99".into(), "-O1".into()],
            link_args: vec!["-lm".into(), "-pthread".into()],
            ..Default::default()
        })
        .unwrap();
    // A fake machine: powersave governor, turbo on, busy.
    let root = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put(
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "powersave\n",
    );
    put("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    put("proc/loadavg", "3.50 2.00 1.00 4/300 12345\n");
    let run = |args: &[&str]| {
        toolchain::run(Command::new(&exe).args(args), Some(Duration::from_secs(10)))
            .unwrap()
            .stdout
    };
    let root_s = root.path().to_str().unwrap();
    let noisy = run(&[root_s]);
    assert!(noisy.contains("governor is 'powersave'"), "{noisy}");
    assert!(noisy.contains("turbo boost is on"), "{noisy}");
    assert!(noisy.contains("load average 3.50"), "{noisy}");
    assert!(noisy.contains("not pinned"), "{noisy}");
    // A quiet, tuned machine, pinned: no warnings at all.
    put(
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "performance\n",
    );
    put("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n");
    put("proc/loadavg", "0.02 0.01 0.00 1/300 12345\n");
    let quiet = run(&[root_s, "pinned"]);
    assert_eq!(quiet, "", "{quiet}");
    // More warnings than the report holds: the first ones, each whole.
    let full = run(&["--overfill"]);
    let lines: Vec<&str> = full.lines().collect();
    assert!(
        full.ends_with('\n') && lines.len() > 50 && lines.len() < 200,
        "{full}"
    );
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(
            *line,
            format!("warning {i:03}: some forty characters of explanation...."),
            "{full}"
        );
    }
}
