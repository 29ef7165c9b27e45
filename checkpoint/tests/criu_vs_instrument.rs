//! The checkpoint's accuracy against an independent reference: the delayed
//! checkpoint reproduces the in-app time of a call as profiled by tdg's
//! *instrument* library (TSC markers, its own clock calibration), not only
//! as timed by the checkpoint library's own region markers. One binary is
//! built with both sets of markers around the same call, so the profiled
//! plain runs and the restored copies time the same call of the same code on
//! the same (deterministic) data. Real CRIU, real restores; needs root and
//! `scripts/setup`.
mod common;

use checkpoint::{capture, time_image, CaptureRequest, TimeOptions};
use common::*;
use instrument::format::{self, Profile};
use stats::{relative_difference, Summary};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const CALL: u64 = 8;
const DELAY: u64 = 3;
/// Short rounds: a burst of load from other work on the shared machine then
/// falls on a few samples of each kind rather than on one whole batch.
const ROUNDS: usize = 8;
const PER_ROUND: usize = 3;
/// Records the runtime allocates (12 calls are made): a small arena keeps
/// the image and the pre-faulting out of the picture.
const PROFILE_CALLS: &str = "64";
/// The calibrated tick rate must be this close to the TSC's documented rate.
const TICK_RATE_TOLERANCE: f64 = 0.02;

/// datasens built with the checkpoint host library and, through
/// `-DTDG_INSTRUMENT_MARKERS`, the instrument runtime built on demand.
fn build_marked(ws: &Workspace) -> PathBuf {
    let cc = toolchain::CCompiler::find(None).unwrap();
    let host = checkpoint::write_host_library(&ws.dir.path().join("hostlib")).unwrap();
    let rt = instrument::runtime::build(&cc, &ws.dir.path().join("instrument"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let exe = ws.dir.path().join("datasens-marked");
    let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
    cc.compile(&toolchain::CompileJob {
        sources: vec![
            Path::new(APPS).join("datasens.c"),
            Path::new(APPS).join("isort.c"),
            host.object(&cc, cache.as_ref()).unwrap(),
        ],
        output: exe.clone(),
        cflags: ["-O2", "-Wall", "-Wextra", "-Werror"]
            .map(String::from)
            .to_vec(),
        defines: vec![("TDG_INSTRUMENT_MARKERS".into(), None)],
        include_dirs: vec![host.dir.clone(), rt.include_dir.clone()],
        link_args: vec![rt.static_lib.display().to_string(), "-lpthread".into()],
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    exe
}

/// The TSC rate the probe documents for this machine (cpuid, hypervisor
/// leaf, kernel calibration or the model name), in ticks per second.
fn documented_tsc_hz() -> f64 {
    let (ghz, source) = probe::documented::documented_tsc_ghz().expect(
        "no documented TSC rate (cpuid, kernel log or model name); the tick-rate check needs one",
    );
    eprintln!("documented TSC rate {ghz:.4} GHz ({source})");
    ghz * 1e9
}

/// One profiled plain run: `TDG_PROFILE_OUT` set, checkpoint variables
/// cleared, output captured so the application's lines stay out of the log.
fn profile_once(exe: &Path, site: &str, ws: &Workspace, tag: &str) -> Profile {
    let path = ws.dir.path().join(format!("{site}-{tag}.tdgp"));
    let mut cmd = Command::new(exe);
    cmd.arg(site)
        .arg(ws.out_file())
        .env("TDG_PROFILE_OUT", &path)
        .env("TDG_PROFILE_CALLS", PROFILE_CALLS);
    for name in checkpoint::env::ALL {
        cmd.env_remove(name);
    }
    toolchain::run(&mut cmd, Some(Duration::from_secs(60))).unwrap_or_else(|e| panic!("{e}"));
    format::read(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The profiled time of call `call` of `site`, minus the empty begin/end
/// pair, as `tdg profile report` counts it.
fn call_ns(p: &Profile, site: &str, call: u64) -> f64 {
    let id = p
        .routine_id(site)
        .unwrap_or_else(|| panic!("the profile has no routine {site}"));
    let hits: Vec<_> = p
        .records
        .iter()
        .filter(|r| r.routine == id && r.values().first() == Some(&(call as i64)))
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "{site}: call {call} recorded {} times",
        hits.len()
    );
    p.ticks_to_ns(hits[0].ticks.saturating_sub(p.timer_overhead_ticks))
}

fn assert_tick_rate(rates: &[u64], tsc_hz: f64, what: &str) {
    let worst = rates
        .iter()
        .map(|&r| relative_difference(r as f64, tsc_hz))
        .fold(0.0, f64::max);
    let (lo, hi) = (
        *rates.iter().min().unwrap() as f64,
        *rates.iter().max().unwrap() as f64,
    );
    eprintln!(
        "{what}: ticks_per_sec {:.6}..{:.6} GHz over {} profiles, worst {:.0} ppm from the TSC's {:.6} GHz",
        lo / 1e9,
        hi / 1e9,
        rates.len(),
        worst * 1e6,
        tsc_hz / 1e9
    );
    assert!(
        worst < TICK_RATE_TOLERANCE,
        "{what}: a profile's ticks_per_sec ({:.4}..{:.4} GHz) is {:.2}% away from the TSC's {:.4} GHz",
        lo / 1e9,
        hi / 1e9,
        worst * 100.0,
        tsc_hz / 1e9
    );
}

struct Measured {
    profiled: Summary,
    delayed: Summary,
    immediate: Summary,
}

/// Capture call CALL of `site` delayed and immediately from the marked
/// binary, then interleave profiled plain runs and restores of both images
/// in rounds, so the shared machine's noise falls on all three alike.
fn measure(site: &str, tsc_hz: f64) -> Measured {
    let _alone = exclusive();
    pin_to_one_cpu();
    let ws = Workspace::new(&format!("vs-instr-{site}"));
    let exe = build_marked(&ws);
    let criu = criu();
    // The captured process is profiled like the plain runs (same arena, same
    // markers); `env` execs it, so CRIU dumps the application itself.
    let command: Vec<OsString> = os_args(&[
        &"env",
        &format!(
            "TDG_PROFILE_OUT={}",
            ws.dir.path().join("capture.%p.tdgp").display()
        ),
        &format!("TDG_PROFILE_CALLS={PROFILE_CALLS}"),
        &exe,
        &site,
        &ws.out_file(),
    ]);
    let capture_at = |delay: u64, name: &str| {
        capture(
            &CaptureRequest {
                command: command.clone(),
                image: ws.image(name),
                site: Some(site.to_string()),
                call: CALL,
                delay,
                timeout: Some(Duration::from_secs(300)),
                quiet: true,
                preload: None,
            },
            &criu,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        ws.image(name)
    };
    let delayed_img = capture_at(DELAY, "delayed");
    let immediate_img = capture_at(0, "immediate");
    let opts = TimeOptions {
        samples: PER_ROUND,
        criu: Some(criu.clone()),
        ..Default::default()
    };
    let (mut profiled, mut delayed, mut immediate, mut rates) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for run in 0..PER_ROUND {
            let p = profile_once(&exe, site, &ws, &format!("{round}-{run}"));
            assert!(p.tsc, "the runtime fell back to nanoseconds on x86-64");
            profiled.push(call_ns(&p, site, CALL));
            rates.push(p.ticks_per_sec);
        }
        let time = |img: &Path| time_image(img, &opts).unwrap_or_else(|e| panic!("{e}"));
        delayed.extend(time(&delayed_img).samples_ns.iter().map(|&n| n as f64));
        immediate.extend(time(&immediate_img).samples_ns.iter().map(|&n| n as f64));
    }
    assert_tick_rate(&rates, tsc_hz, site);
    let m = Measured {
        profiled: Summary::of(&profiled).unwrap(),
        delayed: Summary::of(&delayed).unwrap(),
        immediate: Summary::of(&immediate).unwrap(),
    };
    for (label, s) in [
        ("instrument-profiled in-app", &m.profiled),
        ("delayed checkpoint", &m.delayed),
        ("immediate checkpoint", &m.immediate),
    ] {
        eprintln!("{site}: {}", describe(label, s));
    }
    eprintln!(
        "{site}: delayed/profiled {:.3}, immediate/profiled {:.3}",
        m.delayed.median / m.profiled.median,
        m.immediate.median / m.profiled.median
    );
    m
}

fn assert_delayed_replays_the_profiled_call(site: &str, m: &Measured) {
    assert!(
        within_replay_factor(m.delayed.median, m.profiled.median),
        "{site}: delayed median {:.0} ns is not within {REPLAY_FACTOR}x of the instrument-profiled in-app median {:.0} ns",
        m.delayed.median,
        m.profiled.median
    );
}

/// The pointer chase: warm in L2 inside the application, cold right after an
/// immediate restore; the delayed checkpoint replays three calls first.
#[test]
fn delayed_search_matches_instrument_profile_immediate_is_cold() {
    let m = measure("search", documented_tsc_hz());
    // The profiled plain runs' median of the chase scatters between runs on
    // some hosts, and restored copies read it slower there, for a cause not
    // yet known (docs/checkpoint.md, Limits): the search asserts what the
    // delay buys; the sort, that the replay is the application's call.
    assert_delay_rebuilds_the_cache_state(
        "search",
        m.profiled.median,
        m.delayed.median,
        m.immediate.median,
    );
    assert_immediate_is_cold("search", &m.immediate, &m.delayed);
}

/// The early-exit sort on nearly sorted data (prefetch-friendly, so the
/// immediate checkpoint's cold start is small and only printed).
#[test]
fn delayed_sort_replays_the_instrument_profiled_call() {
    let m = measure("sort", documented_tsc_hz());
    assert_delayed_replays_the_profiled_call("sort", &m);
}

/// The calibration bug this guards against showed only under load (a
/// preemption between the TSC read and the clock read skewed the rate to
/// 1.3-2.6 GHz). Short profiled runs while every CPU is busy with spinning
/// threads must still report the TSC's rate.
#[test]
fn tick_rate_stays_at_the_tsc_rate_under_load() {
    let tsc_hz = documented_tsc_hz();
    let _alone = exclusive();
    let ws = Workspace::new("vs-instr-load");
    let exe = build_marked(&ws);
    let stop = AtomicBool::new(false);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rates: Vec<u64> = std::thread::scope(|s| {
        for _ in 0..cpus {
            s.spawn(|| {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
        let rates = (0..8)
            .map(|i| profile_once(&exe, "search", &ws, &format!("load-{i}")).ticks_per_sec)
            .collect();
        stop.store(true, Ordering::Relaxed);
        rates
    });
    assert_tick_rate(&rates, tsc_hz, "under load");
}
