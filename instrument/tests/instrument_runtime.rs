//! The profiling runtime and the interposers, exercised through real C
//! programs compiled with the system compiler.

use instrument::{format, interpose, report, session};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use toolchain::CompileJob;

mod instrument_support;
use instrument_support::{build_host_with_shared_kernel, build_marked, cc};

fn profile_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tdgp"))
        .collect();
    v.sort();
    v
}

const SUM_KERNEL: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <unistd.h>
#include "tdg_instrument.h"
static volatile long sink;
static long sum(const long *a, int n) { long s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
"#;

#[test]
fn full_buffer_counts_dropped_records_and_writes_only_what_fits() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
int main(void) {{
    long a[64] = {{0}};
    for (int k = 0; k < 1000; k++) {{ int n = 1 + k % 64; TDG_PROFILE(\"sum\", \"n:i\", sink = sum(a, n), n); }}
    printf(\"%lu\\n\", (unsigned long)tdg_dropped());
    return 0;
}}"
        ),
    );
    let out = toolchain::run(
        Command::new(&exe)
            .env("TDG_PROFILE_RECORDS", "100")
            .env("TDG_PROFILE_OUT", dir.path().join("p.%p.tdgp")),
        Some(Duration::from_secs(30)),
    )
    .unwrap();
    assert_eq!(out.stdout.trim(), "900", "the program sees the drop count");
    let files = profile_files(dir.path());
    assert_eq!(files.len(), 1, "%p expands to one file per process");
    let p = format::read(&files[0]).unwrap();
    assert_eq!(p.capacity, 100);
    assert_eq!(p.records.len(), 100);
    assert_eq!(p.dropped, 900);
    assert_eq!(p.routines[0].dropped, 900);
    // The records kept are the first 100 calls, intact.
    for (k, r) in p.records.iter().enumerate() {
        assert_eq!(r.values(), &[1 + (k as i64) % 64]);
    }
    let rep = report::build(&p, &Default::default()).unwrap();
    assert!(report::render_table(&rep, 5).contains("900 dropped"));
}

#[test]
fn threads_record_into_their_own_chunks_without_losing_calls() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
#include <pthread.h>
#define CALLS 20000
/* Every call is made while all five threads exist, so each record's team
 * (the process's threads, read from /proc) is 5, not a count caught while
 * the workers were still starting or already leaving. */
static pthread_barrier_t started, finished;
static void *worker(void *arg) {{
    int n = (int)(long)arg;
    long *a = calloc((size_t)n, sizeof *a);
    pthread_barrier_wait(&started);
    for (int k = 0; k < CALLS; k++) TDG_PROFILE(\"sum\", \"n:i,a:p\", sink = sum(a, n), n, TDG_PTR(a));
    pthread_barrier_wait(&finished);
    free(a);
    return NULL;
}}
int main(void) {{
    pthread_t t[4];
    pthread_barrier_init(&started, NULL, 4);
    pthread_barrier_init(&finished, NULL, 4);
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(10 * (i + 1)));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}}"
        ),
    );
    toolchain::run(
        Command::new(&exe).env("TDG_PROFILE_OUT", dir.path().join("p.tdgp")),
        Some(Duration::from_secs(60)),
    )
    .unwrap();
    let p = format::read(&dir.path().join("p.tdgp")).unwrap();
    assert_eq!(p.dropped, 0);
    assert_eq!(p.threads, 4);
    assert_eq!(p.records.len(), 4 * 20000);
    // Each thread index saw exactly one n (its own), 20000 times, and its
    // records are in time order: no record was torn or mixed up.
    let mut per_thread: std::collections::BTreeMap<u16, Vec<&format::Record>> = Default::default();
    for r in &p.records {
        per_thread.entry(r.thread).or_default().push(r);
    }
    let mut ns: Vec<i64> = Vec::new();
    for recs in per_thread.values() {
        assert_eq!(recs.len(), 20000);
        let n = recs[0].values()[0];
        assert!(recs
            .iter()
            .all(|r| r.values()[0] == n && r.values().len() == 2));
        assert!(recs.windows(2).all(|w| w[0].start < w[1].start));
        ns.push(n);
    }
    ns.sort();
    assert_eq!(ns, vec![10, 20, 30, 40]);
    let rep = report::build(&p, &Default::default()).unwrap();
    assert_eq!(rep.contexts.len(), 4, "{:?}", rep.contexts);
    assert!(
        rep.contexts.iter().all(|c| c.threads == Some(5)),
        "{:?}",
        rep.contexts
    );
    assert_eq!(rep.threads, 4);
}

#[test]
fn a_program_killed_by_a_signal_still_leaves_a_readable_profile() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
int main(int argc, char **argv) {{
    long a[8] = {{0}};
    for (int k = 0; k < 250; k++) TDG_PROFILE(\"sum\", \"n:i\", sink = sum(a, 8), 8);
    (void)argv;
    if (argc > 1) {{ kill(getpid(), SIGTERM); pause(); }}
    volatile int *volatile p = NULL;
    *p = 1; /* a real segmentation fault */
    return 0;
}}"
        ),
    );
    for (extra, signal) in [(None, "SIGSEGV"), (Some("term"), "SIGTERM")] {
        let out = dir.path().join(format!("p{signal}.tdgp"));
        let mut cmd = Command::new(&exe);
        cmd.args(extra).env("TDG_PROFILE_OUT", &out);
        match toolchain::run(&mut cmd, Some(Duration::from_secs(30))) {
            Err(toolchain::ToolchainError::Crashed { signal_name, .. }) => {
                assert_eq!(signal_name, signal)
            }
            other => panic!("expected death by signal {signal}, got {other:?}"),
        }
        let p = format::read(&out).unwrap();
        assert_eq!(p.records.len(), 250, "signal {signal}");
        assert!(p.records.iter().all(|r| r.values() == [8]));
    }
}

#[test]
fn explicit_flush_writes_the_profile_before_the_program_ends() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
int main(void) {{
    long a[8] = {{0}};
    for (int k = 0; k < 10; k++) TDG_PROFILE(\"sum\", \"n:i\", sink = sum(a, 8), 8);
    if (tdg_flush() != 0) return 3;
    for (int k = 0; k < 5; k++) TDG_PROFILE(\"sum\", \"n:i\", sink = sum(a, 8), 8);
    _exit(0); /* skips atexit: only the flush wrote anything */
}}"
        ),
    );
    let out = dir.path().join("p.tdgp");
    toolchain::run(
        Command::new(&exe).env("TDG_PROFILE_OUT", &out),
        Some(Duration::from_secs(30)),
    )
    .unwrap();
    assert_eq!(format::read(&out).unwrap().records.len(), 10);
}

#[test]
fn recorded_ticks_follow_the_work_done_per_call() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    // n = 200 vs n = 200000 longs: 1000x the work.
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
int main(void) {{
    long *a = calloc(200000, sizeof *a);
    for (int k = 0; k < 200; k++) {{ int n = (k % 2) ? 200 : 200000; TDG_PROFILE(\"sum\", \"n:i\", sink = sum(a, n), n); }}
    free(a);
    return 0;
}}"
        ),
    );
    let out = dir.path().join("p.tdgp");
    toolchain::run(
        Command::new(&exe).env("TDG_PROFILE_OUT", &out),
        Some(Duration::from_secs(30)),
    )
    .unwrap();
    let p = format::read(&out).unwrap();
    let rep = report::build(&p, &Default::default()).unwrap();
    let big = rep
        .contexts
        .iter()
        .find(|c| c.values[0].value == 200000)
        .unwrap();
    let small = rep
        .contexts
        .iter()
        .find(|c| c.values[0].value == 200)
        .unwrap();
    assert!(
        big.all.min > 50.0 * small.all.min,
        "1000x the work must take far longer: {} vs {}",
        big.all.min,
        small.all.min
    );
    assert!(rep.ticks_per_sec > 100_000_000, "{}", rep.ticks_per_sec);
    assert!(big.share > 0.5, "the big context dominates");
}

/// A routine in a shared library, called by a program that knows nothing of
/// tdg: `long ksum(const long *a, int n)`.
fn build_shared_lib_app(dir: &Path) -> (PathBuf, PathBuf) {
    let lib_c = dir.join("k.c");
    std::fs::write(
        &lib_c,
        "long ksum(const long *a, int n) { long s = 0; for (int i = 0; i < n; i++) s += a[i] * (i + 1); return s; }\n",
    )
    .unwrap();
    let app = build_host_with_shared_kernel(
        dir,
        &lib_c,
        r#"#include <stdio.h>
#include <stdlib.h>
long ksum(const long *a, int n);
int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 300;
    long *a = malloc(4096 * sizeof *a), t = 0;
    for (int i = 0; i < 4096; i++) a[i] = i % 7;
    for (int k = 0; k < reps; k++) t += ksum(a, (k % 3 == 0) ? 4096 : 512);
    printf("%ld\n", t);
    return 0;
}
"#,
    );
    (app, lib_c)
}

const KSUM_SPEC: &str = "routine=long ksum(const long* a, int n);\ninit={ n=Macro(NK, 100); a=Vector(long, RANDOM, align(64), n); };\n";

#[test]
fn preload_shim_profiles_a_shared_library_routine_without_source_change() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = build_shared_lib_app(dir.path());
    let spec = spec_lang::check_source(KSUM_SPEC, "ksum.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap();
    let shims =
        interpose::build_interposers(&cc(), &spec, &dir.path().join("shim"), &[], None).unwrap();
    let plain = toolchain::run(&mut Command::new(&app), None)
        .unwrap()
        .stdout;

    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let outcome = session::run_profiled(
        &[app.clone().into_os_string(), "300".into()],
        Some(&shims.preload_shim),
        &session::RuntimeSettings::default(),
        &out_dir,
    )
    .unwrap();
    assert!(outcome.status.success());
    let p = outcome.profile;
    assert_eq!(p.records.len(), 300);
    assert_eq!(p.routines[0].name, "ksum");
    assert_eq!(p.routines[0].params_text(), "n:i,a:p");
    let rep = report::build(&p, &Default::default()).unwrap();
    assert_eq!(rep.contexts.len(), 2);
    // Looked up by value, not rank: one descheduled call could reorder them.
    let big = rep
        .contexts
        .iter()
        .find(|c| c.values[0].value == 4096)
        .unwrap();
    let small = rep
        .contexts
        .iter()
        .find(|c| c.values[0].value == 512)
        .unwrap();
    assert_eq!(big.calls, 100);
    assert_eq!(small.calls, 200);
    assert_eq!(big.distinct_pointers, vec![("a".to_string(), 1)]);

    // The shim forwards faithfully: same output as without it.
    let shimmed = toolchain::run(
        Command::new(&app)
            .env("LD_PRELOAD", &shims.preload_shim)
            .env("TDG_PROFILE_OUT", dir.path().join("again.tdgp")),
        None,
    )
    .unwrap()
    .stdout;
    assert_eq!(plain, shimmed);
}

#[test]
fn every_process_of_a_pipeline_is_merged_into_one_profile() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = build_shared_lib_app(dir.path());
    let spec = spec_lang::check_source(KSUM_SPEC, "ksum.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap();
    let shims =
        interpose::build_interposers(&cc(), &spec, &dir.path().join("shim"), &[], None).unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let script = format!("{0} 30 >/dev/null && {0} 60 >/dev/null", app.display());
    let outcome = session::run_profiled(
        &["sh".into(), "-c".into(), script.into()],
        Some(&shims.preload_shim),
        &session::RuntimeSettings::default(),
        &out_dir,
    )
    .unwrap();
    assert_eq!(
        outcome.files.len(),
        2,
        "sh itself never calls ksum: no file"
    );
    assert_eq!(outcome.profile.pids.len(), 2);
    assert_eq!(outcome.profile.records.len(), 90);
}

#[test]
fn wrap_object_profiles_a_statically_linked_routine() {
    let _shared = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let (_, lib_c) = build_shared_lib_app(dir.path());
    let spec = spec_lang::check_source(KSUM_SPEC, "ksum.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Driver))
        .unwrap();
    let shims =
        interpose::build_interposers(&cc(), &spec, &dir.path().join("shim"), &[], None).unwrap();
    let exe = dir.path().join("static_app");
    cc().compile(&CompileJob {
        sources: vec![dir.path().join("host.c"), lib_c],
        output: exe.clone(),
        cflags: vec!["-O2".into()],
        link_args: vec![
            format!("-Wl,--wrap={}", shims.symbol),
            shims.wrap_object.display().to_string(),
            shims.runtime.static_lib.display().to_string(),
            "-lpthread".into(),
        ],
        ..Default::default()
    })
    .unwrap();
    let out = dir.path().join("w.tdgp");
    let run = toolchain::run(
        Command::new(&exe).arg("90").env("TDG_PROFILE_OUT", &out),
        None,
    )
    .unwrap();
    assert!(!run.stdout.trim().is_empty());
    let p = format::read(&out).unwrap();
    assert_eq!(p.records.len(), 90);
    assert_eq!(
        p.records.iter().filter(|r| r.values()[0] == 4096).count(),
        30
    );
}

#[test]
fn first_calls_on_cold_data_form_a_slower_early_group() {
    // Timed: alone, on one CPU (the other vCPU shares this one's L1 and L2).
    let _serial = testkit::exclusive();
    testkit::pin_to_one_cpu();
    // Seed 003 Figs. 8-9: the operands start out of cache (flushed line by
    // line here), so the first call of the context runs at memory speed and
    // the later ones at cache speed. 512 KiB fits this machine's L2.
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
#include <x86intrin.h>
/* One load per cache line: memory-bound, so where the lines are decides the time. */
static long per_line(const long *a, long n) {{ long s = 0; for (long i = 0; i < n; i += 8) s += a[i]; return s; }}
int main(void) {{
    long n = 65536;
    long *a = aligned_alloc(64, (size_t)n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = i;
    for (long i = 0; i < n; i += 8) _mm_clflush(&a[i]);
    _mm_mfence();
    for (int k = 0; k < 60; k++) TDG_PROFILE(\"per_line\", \"n:i\", sink = per_line(a, n), n);
    sink = sum(a, 0); /* the shared prelude's kernel, unused here */
    free(a);
    return 0;
}}"
        ),
    );
    let out = dir.path().join("p.tdgp");
    toolchain::run(
        Command::new(&exe).env("TDG_PROFILE_OUT", &out),
        Some(Duration::from_secs(30)),
    )
    .unwrap();
    let p = format::read(&out).unwrap();
    let rep = report::build(
        &p,
        &report::ReportOptions {
            routine: None,
            early_calls: 1,
        },
    )
    .unwrap();
    let c = &rep.contexts[0];
    let (early, late) = (c.early.unwrap(), c.late.unwrap());
    println!(
        "cold first call {} ns, warm median {} ns",
        early.min, late.median
    );
    // Noise only ever adds time, and the late median is robust to it.
    assert!(
        early.min > 2.0 * late.median,
        "cold first call {} ns vs warm median {} ns",
        early.min,
        late.median
    );
    assert!(report::render_table(&rep, 3).contains("early/late mean x"));
}

#[test]
fn non_temporal_records_disturb_the_applications_cached_data_less_than_ordinary_stores() {
    // Timed: alone, on one CPU (the other vCPU shares this one's L1 and L2).
    let _serial = testkit::exclusive();
    testkit::pin_to_one_cpu();
    // The effect the movnti stores exist for: 1 MiB of records written
    // between two passes over a 512 KiB L2-resident table. With ordinary
    // stores the record lines are allocated into L1/L2 and push the table
    // out, so the second pass misses; with movnti they bypass the caches
    // and the table stays. A random-cycle chase defeats the prefetchers, so
    // each evicted line costs a full L3 latency.
    //
    // The control is an idle gap as long as the records took: on a shared
    // VM the table also decays from L2 by itself while the CPU spins (the
    // other tenants share the cache), by an amount that moves with their
    // load. Against a warm pass alone that decay could hide the contrast
    // or fake it, so the records' own share is the pass after them over
    // the pass after the idle gap, round by round (each pass normalised by
    // the warm pass just before it). Figures: docs/profiling.md.
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked(
        dir.path(),
        &format!(
            "{SUM_KERNEL}
#include <stdint.h>
#define ROUNDS 41
static long chase(const long *a, long steps) {{ long p = 0; for (long i = 0; i < steps; i++) p = a[p]; return p; }}
/* The chase's time, over that of the same chase on a freshly warmed table. */
static double pass_after(const long *a, long lines, int id, uint64_t *gap) {{
    sink = chase(a, lines); /* table into L2 */
    uint64_t t0 = tdg_begin(); sink = chase(a, lines); uint64_t t1 = tdg_begin();
    uint64_t warm = t1 - t0, g0 = tdg_begin();
    if (id >= 0) {{
        for (int64_t k = 0; k < 16384; k++) tdg_end(id, tdg_begin(), 1, &k); /* 1 MiB of records */
        *gap = tdg_begin() - g0;
    }} else {{
        while (tdg_begin() - g0 < *gap) {{ }} /* as long, writing nothing */
    }}
    t0 = tdg_begin(); sink = chase(a, lines); t1 = tdg_begin();
    return (double)(t1 - t0) / (double)warm;
}}
static double median(double *v, int n) {{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {{ double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }}
    return v[n / 2];
}}
int main(void) {{
    long lines = (512 * 1024) / 64, n = lines * 8;
    long *a = aligned_alloc(64, (size_t)n * sizeof *a);
    long *order = malloc((size_t)lines * sizeof *order);
    for (long i = 0; i < lines; i++) order[i] = i;
    uint64_t x = 88172645463325252u;
    for (long i = lines - 1; i > 0; i--) {{
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        long j = (long)(x % (uint64_t)i), t = order[i]; order[i] = order[j]; order[j] = t;
    }}
    for (long i = 0; i < lines; i++) a[order[i] * 8] = order[(i + 1) % lines] * 8;
    int id = tdg_routine(\"noop\", \"k:i\");
    double logged[ROUNDS], idle[ROUNDS], own[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {{
        uint64_t gap = 0;
        logged[r] = pass_after(a, lines, id, &gap);
        idle[r] = pass_after(a, lines, -1, &gap);
        own[r] = logged[r] / idle[r];
    }}
    sink = sum(a, 0); /* the shared prelude's kernel, unused here */
    double o = median(own, ROUNDS), l = median(logged, ROUNDS), i = median(idle, ROUNDS);
    printf(\"%.3f %.3f %.3f\\n\", o, l, i);
    return 0;
}}"
        ),
    );
    // (records' own share, pass after the records, pass after the idle gap)
    let slowdown = |stores: &str| -> [f64; 3] {
        let out = toolchain::run(
            Command::new(&exe)
                .env("TDG_PROFILE_RECORDS", "700000")
                .env("TDG_PROFILE_STORES", stores)
                .env("TDG_PROFILE_OUT", dir.path().join(format!("{stores}.tdgp"))),
            Some(Duration::from_secs(60)),
        )
        .unwrap();
        let v: Vec<f64> = out
            .stdout
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        [v[0], v[1], v[2]]
    };
    // Alternating processes, the median of three each: the shared
    // machine's speed drifts between runs.
    let measure = || {
        let (mut nt, mut cached) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (a, b) = (slowdown("nontemporal"), slowdown("cached"));
            eprintln!(
                "after 1 MiB of records / after an idle gap: movnti x{:.2} / x{:.2}, ordinary x{:.2} / x{:.2}",
                a[1], a[2], b[1], b[2]
            );
            nt.push(a[0]);
            cached.push(b[0]);
        }
        let median = |v: &[f64]| stats::Summary::of(v).expect("three processes").median;
        let (nt, cached) = (median(&nt), median(&cached));
        println!("the records' own slowdown of the table pass: movnti x{nt:.2}, ordinary stores x{cached:.2}");
        (nt, cached)
    };
    // Where the caches keep the table through 1 MiB of ordinary stores
    // (a larger or differently replaced L2), the contrast cannot show, and
    // the run says so. What holds under noise is the order: the movnti
    // records slow the pass less than ordinary stores do. By how much (and
    // that movnti leaves the table as an idle gap does) is a benchmark:
    // scripts/bench-instrument, docs/profiling.md.
    let premise = |cached: f64| cached >= 1.3;
    let holds = |(nt, cached): (f64, f64)| !premise(cached) || nt < cached;
    // Once more when it does not hold: the host's own decay of the table
    // varies from one process to the next, and one unlucky measurement is
    // measured again; a real disturbance shows both times.
    let mut m = measure();
    if !holds(m) {
        eprintln!("measuring once more");
        m = measure();
    }
    let (nt, cached) = m;
    if !premise(cached) {
        eprintln!(
            "SKIPPED the movnti contrast: on this machine 1 MiB of ordinary stores slowed the table pass only x{cached:.2} over an idle gap (movnti x{nt:.2})"
        );
        return;
    }
    assert!(
        nt < cached,
        "movnti records must disturb the cache less than ordinary stores: x{nt:.2} vs ordinary x{cached:.2}"
    );
}
