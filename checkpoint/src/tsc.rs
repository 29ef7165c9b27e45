//! The TSC rate the host library converts region ticks with: tdg passes it
//! (TDG_TSC_GHZ in plain runs, `tsc_ghz=` on a copy's control pipe) only
//! when the TSC is constant and non-stop and its rate is documented by the
//! processor, the hypervisor or the kernel; otherwise the library times with
//! CLOCK_MONOTONIC_RAW.

/// Whether /proc/cpuinfo lists both `constant_tsc` and `nonstop_tsc`.
pub fn tsc_is_invariant() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// TSC ticks per nanosecond for region timing, if the TSC can be trusted.
pub fn region_tsc_ghz() -> Option<f64> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "x86")) || !tsc_is_invariant() {
        return None;
    }
    probe::documented::documented_tsc_ghz()
        .map(|(ghz, _)| ghz)
        .filter(|g| g.is_finite() && *g > 0.0)
}
