//! Delayed checkpoints reproduce the in-application time of a data-sensitive
//! routine; immediate ones are slower (cold caches after the restore). Real
//! CRIU, real restores; needs root and `scripts/setup`.
mod common;

use checkpoint::stats::relative_difference;
use checkpoint::{
    capture, measure_in_app, time_image, CaptureRequest, InAppRequest, SampleStats, TimeOptions,
};
use common::*;
use std::path::Path;
use std::time::Duration;

const CALL: u64 = 8;
const DELAY: u64 = 3;
const ROUNDS: usize = 3;
const PER_ROUND: usize = 5;

/// Wall-clock statistics, the clock a default driver reports. The regions
/// are tens of microseconds with working sets that fit in L2, so preemption
/// on the shared machine rarely lands inside one and the medians hold; CPU
/// times are printed alongside.
struct Measured {
    in_app: SampleStats,
    delayed: SampleStats,
    immediate: SampleStats,
}

#[derive(Default)]
struct Samples {
    cpu: Vec<f64>,
    wall: Vec<f64>,
}

impl Samples {
    fn add(&mut self, wall: &[u64], cpu: &[u64]) {
        self.wall.extend(wall.iter().map(|&n| n as f64));
        self.cpu.extend(cpu.iter().map(|&n| n as f64));
    }
}

/// In-app runs and restores of both images, interleaved in rounds so the
/// shared machine's noise falls on all three alike.
fn measure(site: &str) -> Measured {
    let ws = Workspace::new(&format!("acc-{site}"));
    let exe = ws.build("datasens.c", "datasens", &[]);
    let criu = criu();
    let command = os_args(&[&exe, &site, &ws.out_file()]);
    let capture_at = |delay: u64, name: &str| {
        let req = CaptureRequest {
            command: command.clone(),
            image: ws.image(name),
            site: Some(site.to_string()),
            call: CALL,
            delay,
            timeout: Some(Duration::from_secs(120)),
            quiet: true,
        };
        capture(&req, &criu).unwrap_or_else(|e| panic!("{e}"));
        ws.image(name)
    };
    let delayed_img = capture_at(DELAY, "delayed");
    let immediate_img = capture_at(0, "immediate");
    let opts = TimeOptions {
        samples: PER_ROUND,
        criu: Some(criu.clone()),
        ..Default::default()
    };
    let (mut in_app, mut delayed, mut immediate) =
        (Samples::default(), Samples::default(), Samples::default());
    for _ in 0..ROUNDS {
        let r = measure_in_app(&InAppRequest {
            command: command.clone(),
            site: Some(site.to_string()),
            call: CALL,
            runs: PER_ROUND,
            timeout: Some(Duration::from_secs(120)),
        })
        .unwrap_or_else(|e| panic!("{e}"));
        in_app.add(&r.samples_ns, &r.samples_cpu_ns);
        let time = |img: &Path| time_image(img, &opts).unwrap_or_else(|e| panic!("{e}"));
        let d = time(&delayed_img);
        delayed.add(&d.samples_ns, &d.samples_cpu_ns);
        let i = time(&immediate_img);
        immediate.add(&i.samples_ns, &i.samples_cpu_ns);
    }
    for (label, s) in [
        ("in-app", &in_app),
        ("delayed", &delayed),
        ("immediate", &immediate),
    ] {
        eprintln!(
            "{site}: {}",
            describe(&format!("{label} cpu"), &SampleStats::of(&s.cpu).unwrap())
        );
        eprintln!(
            "{site}: {}",
            describe(&format!("{label} wall"), &SampleStats::of(&s.wall).unwrap())
        );
    }
    Measured {
        in_app: SampleStats::of(&in_app.wall).unwrap(),
        delayed: SampleStats::of(&delayed.wall).unwrap(),
        immediate: SampleStats::of(&immediate.wall).unwrap(),
    }
}

fn assert_delayed_matches_in_app(site: &str, m: &Measured) {
    let err = relative_difference(m.delayed.median, m.in_app.median);
    assert!(
        err < 0.10,
        "{site}: delayed median {:.0} ns is {:.1}% away from the in-app median {:.0} ns",
        m.delayed.median,
        err * 100.0,
        m.in_app.median
    );
}

/// The paper's scan_for_patterns case: a pointer chase over a list that fits
/// in L2 when warm. Immediately after a restore it is not in L2 (measured
/// ~15x slower here); three replayed calls bring it back.
#[test]
fn pointer_chasing_search_delayed_matches_in_app_immediate_is_cold() {
    let m = measure("search");
    assert_delayed_matches_in_app("search", &m);
    assert!(
        m.immediate.median > 2.0 * m.delayed.median,
        "search: immediate median {:.0} ns is not clearly slower than delayed {:.0} ns",
        m.immediate.median,
        m.delayed.median
    );
}

/// The paper's mainGtU case: an early-exit sort on nearly sorted data. Its
/// sequential sweep is prefetch-friendly, so the cold start after an
/// immediate restore costs only ~20% here (printed, not asserted); the delayed
/// checkpoint must still reproduce the in-app time.
#[test]
fn nearly_sorted_insertion_sort_delayed_matches_in_app() {
    let m = measure("sort");
    assert_delayed_matches_in_app("sort", &m);
}
