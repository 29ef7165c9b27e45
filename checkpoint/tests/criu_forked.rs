//! Many samples per restore (a fork of the restored copy per sample) must
//! time what a fresh restore would: no page fault inside the timed call, the
//! same input bytes in every sample, cold caches for an immediate checkpoint,
//! a clear fallback where a fork cannot replay, nothing left behind. Real
//! CRIU; needs root and setup.
mod common;

use checkpoint::{capture, time_image};
use common::*;
use std::path::{Path, PathBuf};

fn capture_replay(ws: &Workspace, mode: &str, extra: &[&Path], call: u64, delay: u64) -> PathBuf {
    let exe = ws.build_app(&["replay.c"], "replay", &[]);
    let img = ws.image(&format!("{mode}-{delay}"));
    let log = ws.dir.path().join(format!("{mode}.log"));
    let mut command = os_args(&[&exe, &mode, &log]);
    command.extend(extra.iter().map(|p| p.as_os_str().to_os_string()));
    capture(&request(command, img.clone(), "step", call, delay), &criu())
        .unwrap_or_else(|e| panic!("{e}"));
    img
}

/// The timed call writes 256 pages (1 MiB) that none of the delay calls
/// wrote. Without pre-faulting, each would copy-on-write fault inside the
/// timed call of a forked sample.
#[test]
fn forked_samples_take_no_page_fault_in_the_timed_call() {
    let ws = Workspace::new("forked-faults");
    let img = capture_replay(&ws, "pages", &[], 9, 2);
    let report = time_image(&img, &opts(10)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.sampling, "fork", "{report:?}");
    assert_eq!(report.restores, 1);
    assert_eq!(report.samples_minflt.len(), 10);
    assert!(
        report.samples_minflt.iter().all(|&f| f == 0),
        "page faults in the timed calls: {:?}",
        report.samples_minflt
    );
    // The learning pass found at least the 3 x 256 pages the replay writes.
    let learned = report.pages.expect("learned pages reported").written;
    assert!(learned >= 768, "learned only {learned} pages");
    let phases = report.phases_median.expect("phases of forked samples");
    assert!(phases.prepare_faults >= 768, "{phases:?}");
}

/// The delay calls and the timed call read the next 4 KiB of an input file
/// each. Every sample must read the same offsets and bytes as the first.
#[test]
fn a_delay_that_reads_an_input_file_replays_the_same_bytes_in_every_sample() {
    let ws = Workspace::new("forked-input");
    let input = ws.dir.path().join("input.bin");
    let bytes: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&input, bytes).unwrap();
    let img = capture_replay(&ws, "input", &[&input], 8, 3);
    let log = ws.dir.path().join("input.log");
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    let samples = 6;
    let report = time_image(&img, &opts(samples)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.sampling, "fork", "{report:?}");
    assert_eq!(report.samples_ns.len(), samples);
    let text = std::fs::read_to_string(&log).unwrap();
    let replayed: Vec<&str> = text.lines().skip(before).collect();
    // The learning pass and every sample: delay calls 5, 6, 7 and timed call 8.
    assert_eq!(replayed.len(), 4 * (samples + 1), "{replayed:?}");
    let first = &replayed[..4];
    assert!(first[0].starts_with("offset=16384 "), "{first:?}");
    for (i, sample) in replayed.chunks(4).enumerate() {
        assert_eq!(sample, first, "sample {i} read other bytes");
    }
}

/// A delay that consumes pipe data cannot be replayed by fork: one line says
/// why, and the samples are still taken, one restore each.
#[test]
fn a_delay_that_reads_a_pipe_falls_back_to_one_restore_per_sample() {
    let ws = Workspace::new("forked-pipe");
    let img = capture_replay(&ws, "pipe", &[], 6, 2);
    let report = time_image(&img, &opts(3)).unwrap_or_else(|e| panic!("{e}"));
    let why = report.fallback.as_deref().expect("a fallback reason");
    assert!(
        why.contains("descriptor") && why.contains("pipe:["),
        "reason: {why}"
    );
    assert_eq!(report.sampling, "restore", "no sample was taken by fork");
    assert_eq!(report.samples_ns.len(), 3);
    // The forked attempt, then one restore per sample.
    assert_eq!(report.restores, 4, "{report:?}");
    assert!(report.render_text().contains("one restore per sample: "));
}

/// Five thousand samples in one restore: the schedule (10 KB of control
/// text, more than the copy's fixed buffer once held: it cut schedules
/// above ~4100 entries) reaches the copy whole, and every sample is taken
/// and reported (~2 MB of report lines, far more than a pipe buffer). Each
/// sample costs its fork, ~1 ms, so the count is kept just above the old
/// cut; criu_candidates.rs sends 3 MB of control text for the mapping's
/// growth.
#[test]
fn a_schedule_of_five_thousand_samples_arrives_whole() {
    let _alone = exclusive();
    let ws = Workspace::new("forked-5k");
    let img = capture_replay(&ws, "none", &[], 2, 0);
    let mut timer = checkpoint::ImageTimer::open(&img, &opts(1)).unwrap_or_else(|e| panic!("{e}"));
    let schedule = vec![0usize; 5_000];
    let forked = timer
        .plan_mut()
        .restore_forked(&[], &schedule)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(forked.fallback.is_none(), "{:?}", forked.fallback);
    assert!(forked.failed.is_none(), "{:?}", forked.failed);
    assert_eq!(forked.samples.len(), 5_000);
}

/// Two hundred samples in a row: every one reported, no copy, restorer or
/// PID namespace left behind.
#[test]
fn two_hundred_forked_samples_leave_no_process_or_namespace_behind() {
    let ws = Workspace::new("forked-200");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let img = ws.image("img");
    let namespaces_before = pid_namespaces();
    let command = os_args(&[&exe, &"search", &ws.out_file()]);
    capture(&request(command, img.clone(), "search", 6, 2), &criu())
        .unwrap_or_else(|e| panic!("{e}"));
    let report = time_image(&img, &opts(200)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.samples_ns.len(), 200);
    assert_eq!(report.restores, 1);
    assert!(report.samples_ns.iter().all(|&ns| ns > 0));
    assert!(
        processes_running(&exe).is_empty(),
        "{:?}",
        processes_running(&exe)
    );
    assert!(processes_mentioning(&img).is_empty());
    let left: Vec<u64> = pid_namespaces()
        .difference(&namespaces_before)
        .copied()
        .collect();
    // Another program may have made one meanwhile: this binary's other
    // tests restore their own images in their own namespaces, and may be
    // doing so right now. Ours would hold a process whose
    // command line names this test's files: criu with `-D` the image, or
    // the copy running the workspace's binary.
    let ours = [
        img.to_string_lossy().to_string(),
        ws.dir.path().to_string_lossy().to_string(),
    ];
    for ns in &left {
        for pid in processes_in_namespace(*ns) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            assert!(
                !ours.iter().any(|o| cmdline.contains(o.as_str())),
                "namespace {ns} left with process {pid}: {cmdline}"
            );
        }
    }
}

/// An immediate checkpoint's forked samples read as cold as a fresh restore:
/// the previous sample warmed the pages every child shares, so each flushes
/// them first. The pointer chase is many times slower cold than warm.
///
/// Each sample flushes only the pages a replay touches (learned from the
/// accessed bits): the search's 512 KiB list, which it reads but never
/// writes, and not the application's other 16 MiB. Were a page of the list
/// missed, the previous sample would leave it in L2 and the immediate
/// checkpoint would read warm.
#[test]
fn immediate_forked_samples_read_cold() {
    let ws = Workspace::new("forked-cold");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let take = |delay: u64| {
        let img = ws.image(&format!("d{delay}"));
        let command = os_args(&[&exe, &"search", &ws.out_file()]);
        capture(&request(command, img.clone(), "search", 8, delay), &criu())
            .unwrap_or_else(|e| panic!("{e}"));
        let report = time_image(&img, &opts(15)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.sampling, "fork");
        report
    };
    let immediate = take(0);
    let delayed = take(3);
    let pages = immediate.pages.expect("learned pages reported");
    eprintln!("search (forked): {pages:?}");
    assert!(
        pages.flushed >= 128 && pages.flushed < pages.present / 4,
        "expected the 128 pages of the list and little else flushed: {pages:?}"
    );
    assert_immediate_is_cold("search (forked)", &immediate.region_ns, &delayed.region_ns);
}

fn pid_namespaces() -> std::collections::BTreeSet<u64> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| namespace_of(&e.path()))
        .collect()
}

fn namespace_of(proc_dir: &Path) -> Option<u64> {
    let link = std::fs::read_link(proc_dir.join("ns/pid")).ok()?;
    let text = link.to_string_lossy().to_string();
    text.trim_start_matches("pid:[")
        .trim_end_matches(']')
        .parse()
        .ok()
}

fn processes_in_namespace(ns: u64) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| namespace_of(&e.path()) == Some(ns))
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect()
}

/// A tune round on the fork path: every candidate loaded once in the
/// restored copy, the children running them round-robin. One that crashes
/// drops out with its signal and phase; the others keep all their samples.
#[test]
fn candidates_of_one_round_interleave_in_one_restore_and_a_crash_drops_out_alone() {
    let ws = Workspace::new("forked-round");
    let exe = ws.build("datasens.c", "datasens", &["-rdynamic"]);
    let img = ws.image("sort");
    let command = os_args(&[&exe, &"sort", &ws.out_file()]);
    capture(&request(command, img.clone(), "sort", 8, 2), &criu())
        .unwrap_or_else(|e| panic!("{e}"));
    let build = |name: &str, source: &Path| {
        checkpoint::build_candidate(
            &checkpoint::CandidateSource {
                implementation: source.to_path_buf(),
                cflags: vec!["-O2".into()],
                ..Default::default()
            },
            ws.dir.path(),
            name,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let good = build("good", &Path::new(APPS).join("isort.c"));
    let crash_src = ws.dir.path().join("crash.c");
    std::fs::write(
        &crash_src,
        "void isort(long *a, int n) { (void)a; (void)n; *(volatile long *)0 = 1; }\n",
    )
    .unwrap();
    let crash = build("crash", &crash_src);
    let timer = checkpoint::ImageTimer::open(&img, &opts(1)).unwrap_or_else(|e| panic!("{e}"));
    let schedule: Vec<usize> = (0..4).flat_map(|_| [0, 1, 2]).collect();
    let taken = timer
        .take_samples(&[good, crash], &schedule, false)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(taken.forked);
    assert_eq!(taken.failures.len(), 1, "{:?}", taken.failures);
    let (k, e) = &taken.failures[0];
    assert_eq!(*k, 2);
    let e = e.to_string();
    assert!(
        e.contains("crash.c was killed by SIGSEGV in delay call 1 of 2"),
        "{e}"
    );
    for (i, (&k, run)) in schedule.iter().zip(&taken.runs).enumerate() {
        assert_eq!(run.is_some(), k != 2, "sample {i} (implementation {k})");
        if let Some(run) = run {
            assert_eq!(run.minor_faults, Some(0), "sample {i}");
        }
    }
    // The first restore stopped at the crash; the rest took one more.
    assert_eq!(taken.restores, 2);
}
