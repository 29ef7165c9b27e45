//! The environment `tdg` sets for the host library (tdg_checkpoint.c reads the
//! same names; a unit test keeps the two in step).

/// Capture into this image directory.
pub const IMAGE: &str = "TDG_CKPT_IMAGE";
/// The criu binary libcriu runs for the self-dump.
pub const CRIU: &str = "TDG_CKPT_CRIU";
/// libcriu.so to dlopen.
pub const LIBCRIU: &str = "TDG_CKPT_LIBCRIU";
/// Checkpoint this many calls before the timed one.
pub const DELAY: &str = "TDG_CKPT_DELAY";
/// The region site to act on.
pub const SITE: &str = "TDG_REGION_SITE";
/// The timed call of the site (1-based).
pub const CALL: &str = "TDG_REGION_CALL";
/// Plain run: append the timed call's time to this file.
pub const REPORT: &str = "TDG_REGION_REPORT";

/// Plain run: TSC ticks per ns for region timing (absent: clock_gettime).
pub const TSC_GHZ: &str = "TDG_TSC_GHZ";

/// One plain run: write every marked call's time here at exit (`sites`).
pub const SITES: &str = "TDG_REGION_SITES";

pub const ALL: [&str; 9] = [
    IMAGE, CRIU, LIBCRIU, DELAY, SITE, CALL, REPORT, TSC_GHZ, SITES,
];
