//! The TSC rate the host library converts region ticks with: tdg passes
//! the rate the processor, the hypervisor or the kernel documents (TDG_TSC_GHZ
//! in plain runs, `tsc_ghz=` on a copy's control pipe); whether the counter
//! can be trusted is decided where it is read, by `tdg_timing.h` in the
//! library, which times with CLOCK_MONOTONIC_RAW when it cannot (or when no
//! rate is passed).

/// TSC ticks per nanosecond for region timing, where a rate is documented.
pub fn region_tsc_ghz() -> Option<f64> {
    if !cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        return None;
    }
    probe::documented::documented_tsc_ghz()
        .map(|(ghz, _)| ghz)
        .filter(|g| g.is_finite() && *g > 0.0)
}
