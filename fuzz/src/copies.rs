//! What a restored copy says back to tdg, and what tdg tells it: the
//! result pipe's text (one copy's report, or a sampling copy's many
//! samples), read by `checkpoint time`, `validate`, `run` and `tune` on a
//! checkpoint, and the control pipe's text, read by the host library's C
//! code in every restored copy (`tdg_control_fuzz`, that very reader,
//! compiled into this crate by `build.rs`).

use checkpoint::forked::{failed_implementation, parse_forked};
use checkpoint::restore::CopyReport;
use std::time::Duration;

/// One restored copy's report (`restore_once`): read, and every figure it
/// gives summarised as the timing report would.
pub fn copy_report(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let report = CopyReport::parse(&text);
    let _ = format!("{report:?}");
    if let Some((ns, cpu)) = report.times {
        let _ = stats::Summary::of(&[ns as f64, cpu as f64]);
    }
    report.times.is_some() || report.error.is_some() || report.crash.is_some()
}

/// A sampling copy's report (`restore_forked`): its samples, learned pages,
/// fallback, hidden-write flag and failed implementation, and the samples
/// summarised.
pub fn forked_report(data: &[u8]) -> bool {
    let text = String::from_utf8_lossy(data);
    let forked = parse_forked(&text, 1_000_000, Duration::from_millis(5));
    let _ = failed_implementation(&text);
    let ns: Vec<f64> = forked.samples.iter().map(|r| r.region_ns as f64).collect();
    if let Some(s) = stats::Summary::of(&ns) {
        assert!(s.min <= s.median && s.median <= s.max, "{s:?}");
    }
    let _ = checkpoint::timing::region_uncertainty(
        &forked
            .samples
            .iter()
            .map(|r| r.region_ns)
            .collect::<Vec<_>>(),
        forked
            .samples
            .iter()
            .find_map(|r| r.state.and_then(|s| s.timer_step_ns)),
    );
    if let Some(flag) = &forked.hidden {
        // A flag with a page confirms itself on a second restore.
        let again = checkpoint::timing::confirm_hidden(flag, std::slice::from_ref(flag));
        assert!(flag.pages.is_empty() || again.is_some(), "{flag:?}");
    }
    !forked.samples.is_empty() || forked.fallback.is_some()
}

extern "C" {
    fn tdg_control_fuzz(data: *const u8, size: usize) -> libc::c_int;
}

/// The control text as a restored copy reads it (the host library's own C
/// reader): whatever the bytes, it ends in "follow" or "refuse", without
/// overflowing or hanging.
pub fn control(data: &[u8]) -> bool {
    // SAFETY: the C function reads `size` bytes from `data` and keeps no
    // pointer to them.
    unsafe { tdg_control_fuzz(data.as_ptr(), data.len()) == 0 }
}
