//! The profiling runtime at its limits: absurd or malformed sizes from the
//! environment, many short-lived threads, a full buffer, ids it never handed
//! out, and a fatal signal in the middle of an explicit flush. Each case runs
//! a real C program against the real runtime.

use instrument::format;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod instrument_support;
use instrument_support::{build_marked, build_marked_with};

const PRELUDE: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "tdg_instrument.h"
static volatile long sink;
static long sum(const long *a, int n) { long s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
"#;

/// A marker-instrumented program: `PRELUDE`, then `main`.
fn build_with_prelude(dir: &Path, main: &str) -> PathBuf {
    build_marked(dir, &format!("{PRELUDE}{main}"))
}

/// 100000 profiled calls whose results the program checks itself.
const COUNTING_MAIN: &str = r#"
int main(void) {
    long a[16];
    for (int i = 0; i < 16; i++) a[i] = i;
    long total = 0;
    for (int k = 0; k < 100000; k++) {
        TDG_PROFILE("sum", "n:i", sink = sum(a, 16), 16);
        total += sink;
    }
    printf("%ld %lu\n", total, (unsigned long)tdg_dropped());
    return 0;
}
"#;

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect()
}

fn run(cmd: &mut Command) -> toolchain::RunOutput {
    toolchain::run(cmd, Some(Duration::from_secs(60))).unwrap()
}

#[test]
fn sizes_that_overflow_turn_profiling_off_and_the_program_runs_on() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(dir.path(), COUNTING_MAIN);
    // 2^58 + 1 records x 64 bytes wraps to 64 bytes; 3 x ((2^64 + 2) / 3)
    // routines x calls wraps to 2 records.
    let cases: [(&[(&str, &str)], &str); 2] = [
        (
            &[("TDG_PROFILE_RECORDS", "288230376151711745")],
            "TDG_PROFILE_RECORDS",
        ),
        (
            &[
                ("TDG_PROFILE_ROUTINES", "3"),
                ("TDG_PROFILE_CALLS", "6148914691236517206"),
            ],
            "TDG_PROFILE_CALLS",
        ),
    ];
    for (vars, named) in cases {
        let out_pattern = dir.path().join("p.tdgp");
        let mut cmd = Command::new(&exe);
        cmd.envs(vars.iter().copied())
            .env("TDG_PROFILE_OUT", &out_pattern);
        let out = run(&mut cmd);
        assert_eq!(
            out.stdout.trim(),
            "12000000 0",
            "{vars:?}: the program's own results"
        );
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{vars:?}: one line, got {:?}", out.stderr);
        assert!(lines[0].contains(named), "{vars:?}: {}", lines[0]);
        assert!(
            lines[0].contains("TDG_PROFILE_RECORDS=1000000"),
            "a sane value: {}",
            lines[0]
        );
        assert!(lines[0].contains("Profiling is off"), "{}", lines[0]);
        assert!(
            !out_pattern.exists(),
            "{vars:?}: profiling was off, no file"
        );
    }
}

#[test]
fn malformed_sizes_are_reported_and_the_default_is_used() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(dir.path(), COUNTING_MAIN);
    for (var, text) in [
        ("TDG_PROFILE_CALLS", "1e6"),
        ("TDG_PROFILE_CALLS", "abc"),
        ("TDG_PROFILE_ROUTINES", "0"),
        ("TDG_PROFILE_CALLS", "-1"),
        ("TDG_PROFILE_RECORDS", "1e6"),
        ("TDG_PROFILE_RECORDS", "99999999999999999999999"),
    ] {
        let file = dir.path().join("p.tdgp");
        let out = run(Command::new(&exe)
            .env(var, text)
            .env("TDG_PROFILE_OUT", &file));
        assert_eq!(out.stdout.trim(), "12000000 0");
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{var}={text}: got {:?}", out.stderr);
        assert!(
            lines[0].contains(var) && lines[0].contains(text) && lines[0].contains("using"),
            "{var}={text}: {}",
            lines[0]
        );
        let p = format::read(&file).unwrap();
        assert_eq!(p.capacity, 262144, "{var}={text}: the default size");
        assert_eq!(p.records.len(), 100000);
        std::fs::remove_file(&file).unwrap();
    }
}

const THREADS_MAIN: &str = r#"
static int calls_per_thread;
static void *worker(void *arg) {
    long a[4] = {1, 2, 3, 4};
    (void)arg;
    for (int k = 0; k < calls_per_thread; k++) TDG_PROFILE("sum", "n:i", sink = sum(a, 4), 4);
    return NULL;
}
int main(int argc, char **argv) {
    int threads = atoi(argv[1]);
    calls_per_thread = atoi(argv[2]);
    (void)argc;
    for (int i = 0; i < threads; i++) {
        /* One after the other: each thread is gone before the next starts,
         * the worst case for chunks claimed and then abandoned. */
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
        pthread_join(t, NULL);
    }
    printf("%lu\n", (unsigned long)tdg_dropped());
    return 0;
}
"#;

#[test]
fn many_short_lived_threads_do_not_exhaust_the_buffer() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(dir.path(), THREADS_MAIN);
    // A 20000-record buffer, and the default one (262144 records).
    for records in [Some("20000"), None] {
        let file = dir.path().join("p.tdgp");
        let mut cmd = Command::new(&exe);
        cmd.args(["200", "1"]).env("TDG_PROFILE_OUT", &file);
        if let Some(r) = records {
            cmd.env("TDG_PROFILE_RECORDS", r);
        }
        let out = run(&mut cmd);
        assert_eq!(out.stdout.trim(), "0", "{records:?}: no call dropped");
        let p = format::read(&file).unwrap();
        assert_eq!(p.dropped, 0);
        assert_eq!(p.threads, 200);
        assert_eq!(p.records.len(), 200);
        std::fs::remove_file(&file).unwrap();
    }
}

#[test]
fn a_full_buffer_shared_by_threads_accounts_for_every_call() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(dir.path(), THREADS_MAIN);
    let file = dir.path().join("p.tdgp");
    let out = run(Command::new(&exe)
        .args(["4", "1000"])
        .env("TDG_PROFILE_RECORDS", "1000")
        .env("TDG_PROFILE_OUT", &file));
    let p = format::read(&file).unwrap();
    let dropped: u64 = out.stdout.trim().parse().unwrap();
    assert_eq!(p.dropped, dropped, "file and program agree");
    assert_eq!(p.routines[0].dropped, dropped);
    assert_eq!(
        p.records.len() as u64 + dropped,
        4000,
        "every call stored or counted"
    );
    // Only the unused tails of the 4 threads' last chunks (at most 1000/64
    // records each) may go unused.
    assert!(
        p.records.len() >= 1000 - 4 * 15,
        "{} of 1000 used",
        p.records.len()
    );
    assert!(p.records.len() <= 1000);
}

#[test]
fn records_for_ids_never_handed_out_count_as_dropped() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
int main(void) {
    int id = tdg_routine("sum", "n:i");
    int64_t v = 3;
    long a[3] = {1, 2, 3};
    uint64_t t0 = tdg_begin(); sink = sum(a, 3); tdg_end(id, t0, 1, &v);
    t0 = tdg_begin(); sink = sum(a, 3); tdg_end(id + 5, t0, 1, &v);
    t0 = tdg_begin(); sink = sum(a, 3); tdg_end(70000, t0, 1, &v);
    printf("%d %lu\n", id, (unsigned long)tdg_dropped());
    return 0;
}
"#,
    );
    let file = dir.path().join("p.tdgp");
    let out = run(Command::new(&exe).env("TDG_PROFILE_OUT", &file));
    assert_eq!(out.stdout.trim(), "0 2");
    let p = format::read(&file).unwrap();
    assert_eq!(p.records.len(), 1);
    assert_eq!(p.records[0].values(), &[3]);
    assert_eq!(p.dropped, 2, "the two unattributable records are reported");
}

#[test]
fn a_fatal_signal_during_an_explicit_flush_still_leaves_a_complete_profile() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
static void *flusher(void *arg) {
    (void)arg;
    for (;;) tdg_flush(); /* always inside the writer, as far as possible */
    return NULL;
}
int main(void) {
    long a[4] = {1, 2, 3, 4};
    for (int k = 0; k < 300000; k++) TDG_PROFILE("sum", "n:i", sink = sum(a, 4), 4);
    pthread_t t;
    pthread_create(&t, NULL, flusher, NULL);
    struct timespec ts = {0, 60 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_kill(t, SIGTERM); /* lands in the flushing thread */
    pause();
    return 0;
}
"#,
    );
    let file = dir.path().join("p.tdgp");
    match toolchain::run(
        Command::new(&exe)
            .env("TDG_PROFILE_RECORDS", "400000")
            .env("TDG_PROFILE_OUT", &file),
        Some(Duration::from_secs(60)),
    ) {
        Err(toolchain::ToolchainError::Crashed { signal_name, .. }) => {
            assert_eq!(signal_name, "SIGTERM")
        }
        other => panic!("expected death by SIGTERM, got {other:?}"),
    }
    let p = format::read(&file).unwrap();
    assert_eq!(p.records.len(), 300000);
    assert_eq!(
        files_with_suffix(dir.path(), ".part"),
        Vec::<PathBuf>::new(),
        "no half-written profile left behind"
    );
}

/// A full disk inside the profiled program: the profile cannot be
/// written, and that is said, on the program's stderr and to `tdg profile`
/// through the status pipe, instead of a profile silently missing. The
/// program runs in a mount namespace of its own in which its profile
/// directory is a 16 KiB tmpfs (100000 records need 6.4 MB).
#[test]
fn a_full_disk_inside_the_program_is_reported_not_lost_silently() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(dir.path(), COUNTING_MAIN);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let script = r#"mount -t tmpfs -o size=16k tdg-full "$0" && exec "$@""#;
    let in_full_dir = |cmd: &mut Command| {
        cmd.args(["-m", "sh", "-c", script]).arg(&work).arg(&exe);
    };

    let mut cmd = Command::new("unshare");
    in_full_dir(&mut cmd);
    cmd.env("TDG_PROFILE_OUT", work.join("p.tdgp"));
    let out = run(&mut cmd);
    assert!(
        out.stderr
            .contains("tdg_instrument: cannot write the profile")
            && out.stderr.contains("No space left on device"),
        "{}",
        out.stderr
    );

    let mut command: Vec<std::ffi::OsString> = vec!["unshare".into()];
    let mut probe = Command::new("unshare");
    in_full_dir(&mut probe);
    command.extend(probe.get_args().map(|a| a.to_os_string()));
    let e = instrument::session::run_profiled(
        &command,
        None,
        &instrument::session::RuntimeSettings::default(),
        &work,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("could not write its profile")
            && e.contains("No space left on device")
            && e.contains(&work.display().to_string()),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
}

/// fork() in a threaded program while another thread holds the runtime's
/// registry lock: each child still registers a routine of its own and
/// writes its profile (a child that inherited the lock held would spin on
/// it until its alarm).
#[test]
fn a_child_forked_while_another_thread_holds_the_lock_still_profiles() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
#include <sys/wait.h>
static void *hammer(void *arg) {
    (void)arg;
    for (uint64_t i = 0;; i++) tdg_routine_address(0, i); /* takes the lock, over and over */
    return NULL;
}
int main(void) {
    long a[4] = {1, 2, 3, 4};
    TDG_PROFILE("sum", "n:i", sink = sum(a, 4), 4);
    pthread_t t;
    pthread_create(&t, NULL, hammer, NULL);
    enum { KIDS = 100 };
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            alarm(5);
            TDG_PROFILE("child", "n:i", sink = sum(a, 4), 4);
            exit(0);
        }
    }
    int finished = 0;
    for (int k = 0; k < KIDS; k++) {
        int st;
        if (waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            finished++;
    }
    printf("%d\n", finished);
    return 0;
}
"#,
    );
    let out = run(Command::new(&exe).env("TDG_PROFILE_OUT", dir.path().join("p.%p.tdgp")));
    assert_eq!(
        out.stdout.trim(),
        "100",
        "children that hung: {}",
        out.stderr
    );
    let files = files_with_suffix(dir.path(), ".tdgp");
    assert_eq!(files.len(), 101, "the parent's and each child's profile");
    let children = files
        .iter()
        .map(|f| format::read(f).unwrap())
        .filter(|p| p.routines.iter().any(|r| r.name == "child"))
        .count();
    assert_eq!(children, 100);
}

/// A stack overflow in the profiled program: the fatal-signal handler
/// runs on the runtime's alternate stack, so the calls recorded before it
/// are still written, and the program still dies of SIGSEGV.
#[test]
fn a_stack_overflow_still_leaves_the_profile() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
__attribute__((noinline)) static long deep(long n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    return n > 0 ? deep(n + 1) + pad[0] : 0;
}
int main(int argc, char **argv) {
    (void)argv;
    long a[4] = {1, 2, 3, 4};
    for (int k = 0; k < 1000; k++) TDG_PROFILE("sum", "n:i", sink = sum(a, 4), 4);
    return (int)deep(argc);
}
"#,
    );
    let file = dir.path().join("p.tdgp");
    match toolchain::run(
        Command::new(&exe).env("TDG_PROFILE_OUT", &file),
        Some(Duration::from_secs(60)),
    ) {
        Err(toolchain::ToolchainError::Crashed { signal_name, .. }) => {
            assert_eq!(signal_name, "SIGSEGV")
        }
        other => panic!("expected death by SIGSEGV, got {other:?}"),
    }
    let p = format::read(&file).unwrap_or_else(|e| panic!("no profile after the overflow: {e}"));
    assert_eq!(p.records.len(), 1000);
}

/// A call with fourteen values takes three lines of the buffer (5 + 7 + 2
/// values): with room for 100 lines, 33 calls fit whole and the rest are
/// dropped, never cut; each record comes back with all its values and the
/// process's thread count at the call (a second thread alive, then gone).
#[test]
fn records_of_many_values_span_lines_and_carry_the_thread_count() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
static void *idle(void *arg) { (void)arg; struct timespec ts = {0, 100 * 1000 * 1000}; nanosleep(&ts, NULL); return NULL; }
int main(void) {
    int id = tdg_routine("wide", "a:i,b:i,c:i,d:i,e:i,f:i,g:i,h:i,i:i,j:i,k:i,l:i,m:i,n:i");
    long a[3] = {1, 2, 3};
    pthread_t t;
    pthread_create(&t, NULL, idle, NULL);
    for (int k = 0; k < 40; k++) {
        if (k == 20) {
            pthread_join(t, NULL);
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL); /* past the runtime's re-read interval */
        }
        int64_t v[14];
        for (int j = 0; j < 14; j++) v[j] = k * 100 + j;
        uint64_t t0 = tdg_begin(); sink = sum(a, 3); tdg_end(id, t0, 14, v);
    }
    printf("%lu\n", (unsigned long)tdg_dropped());
    return 0;
}
"#,
    );
    let file = dir.path().join("p.tdgp");
    let out = run(Command::new(&exe)
        .env("TDG_PROFILE_OUT", &file)
        .env("TDG_PROFILE_RECORDS", "100"));
    assert_eq!(out.stdout.trim(), "7", "{}", out.stderr);
    let p = format::read(&file).unwrap();
    assert_eq!((p.records.len(), p.dropped), (33, 7));
    for (k, r) in p.records.iter().enumerate() {
        let want: Vec<i64> = (0..14).map(|j| k as i64 * 100 + j).collect();
        assert_eq!(r.values(), want.as_slice());
        let threads = if k < 20 { 2 } else { 1 };
        assert_eq!(r.threads(), Some(threads), "call {k}");
    }
}

/// A forked child's buffer still holds its parent's records; its profile
/// has its own calls only.
#[test]
fn a_forked_child_profiles_its_own_calls_only() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_with_prelude(
        dir.path(),
        r#"
#include <sys/wait.h>
int main(void) {
    long a[3] = {1, 2, 3};
    for (int k = 0; k < 10; k++) TDG_PROFILE("sum", "n:i", sink = sum(a, 3), 1);
    pid_t child = fork();
    if (child == 0) {
        for (int k = 0; k < 3; k++) TDG_PROFILE("sum", "n:i", sink = sum(a, 3), 99);
        exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    printf("%d\n", (int)child);
    return 0;
}
"#,
    );
    let out = run(Command::new(&exe).env("TDG_PROFILE_OUT", dir.path().join("p.%p.tdgp")));
    let child: u32 = out.stdout.trim().parse().unwrap();
    let p = format::read(&dir.path().join(format!("p.{child}.tdgp"))).unwrap();
    let values: Vec<&[i64]> = p.records.iter().map(|r| r.values()).collect();
    assert_eq!(values, vec![&[99][..]; 3]);
}

/// In an OpenMP program each record carries OpenMP's team size, read
/// through dlsym from the libgomp the program loaded: 3 before any
/// parallel region has started a thread (the process has one), 3 for a
/// marked parallel region, then 2 once the program asks for 2; and which
/// thread called (the main thread, and one call from each team member
/// inside a region).
#[test]
fn an_openmp_programs_records_carry_its_team_size() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_marked_with(
        dir.path(),
        &format!(
            "{PRELUDE}{}",
            r#"
#include <omp.h>
static double x[1 << 16];
static void scale(void) {
#pragma omp parallel for
    for (int i = 0; i < (1 << 16); i++) x[i] = x[i] * 0.5 + 1.0;
}
int main(void) {
    long a[3] = {1, 2, 3};
    TDG_PROFILE("serial", "n:i", sink = sum(a, 3), 3);
    TDG_PROFILE("region", "n:i", scale(), 3);
    omp_set_num_threads(2);
    TDG_PROFILE("region", "n:i", scale(), 2);
#pragma omp parallel
    TDG_PROFILE("inside", "n:i", sink = sum(a, 3), omp_get_thread_num());
    printf("%d\n", omp_get_max_threads());
    return 0;
}
"#
        ),
        &["-fopenmp"],
    );
    let file = dir.path().join("p.tdgp");
    let out = run(Command::new(&exe)
        .env("TDG_PROFILE_OUT", &file)
        .env("TDG_PROFILE_ROUTINES", "3")
        .env("OMP_NUM_THREADS", "3"));
    assert_eq!(out.stdout.trim(), "2", "{}", out.stderr);
    let p = format::read(&file).unwrap();
    let of = |name: &str| {
        let id = p.routine_id(name).unwrap();
        p.records
            .iter()
            .filter(|r| r.routine == id)
            .map(|r| (r.values()[0], r.threads(), r.thread))
            .collect::<Vec<_>>()
    };
    assert_eq!(of("serial"), [(3, Some(3), 0)]);
    assert_eq!(of("region"), [(3, Some(3), 0), (2, Some(2), 0)]);
    let mut inside = of("inside");
    inside.sort();
    assert_eq!(inside.len(), 2, "{inside:?}");
    assert_eq!(
        inside.iter().map(|c| c.0).collect::<Vec<_>>(),
        [0, 1],
        "one call from each member of the team"
    );
    assert!(inside.iter().all(|c| c.1 == Some(2)), "{inside:?}");
    let callers: std::collections::BTreeSet<u16> = inside.iter().map(|c| c.2).collect();
    assert_eq!(callers.len(), 2, "two calling threads: {inside:?}");
}
