//! Delayed checkpoints reproduce the in-application time of a data-sensitive
//! routine; immediate ones are slower (cold caches after the restore). Real
//! CRIU, real restores; needs root and `scripts/setup`.
mod common;

use checkpoint::stats::relative_difference;
use checkpoint::SampleStats;
use common::*;

struct Measured {
    in_app: SampleStats,
    delayed: SampleStats,
    immediate: SampleStats,
}

const CALL: u64 = 8;
const DELAY: u64 = 3;
const ROUNDS: usize = 3;
const PER_ROUND: usize = 5;

/// Wall-clock medians, the clock a default driver reports. The regions are
/// tens of microseconds with working sets that fit in L2, so preemption on
/// the shared machine rarely lands inside one; CPU times are printed too.
fn measure(site: &str) -> Measured {
    let ws = Workspace::new(&format!("acc-{site}"));
    let exe = ws.build("datasens.c", "datasens", &[]);
    let command = os_args(&[&exe, &site, &ws.out_file()]);
    let c = compare_in_app_delayed_immediate(&ws, command, site, CALL, DELAY, ROUNDS, PER_ROUND);
    Measured {
        in_app: c.in_app.wall_stats(),
        delayed: c.delayed.wall_stats(),
        immediate: c.immediate.wall_stats(),
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
