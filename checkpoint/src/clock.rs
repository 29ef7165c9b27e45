//! Which clock compares a region's time with the application's: CPU time
//! for long calls, wall time (the TSC) for short ones. Shared by
//! `checkpoint validate`, the captured-call check of `checkpoint time` and
//! `--auto-delay` against the application.

/// The clock a validation compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockChoice {
    /// CPU time for calls of [`CPU_CLOCK_FROM_NS`] and more (from the
    /// first round's plain runs), wall time below.
    Auto,
    Wall,
    Cpu,
}

/// From this call length on, `--clock auto` compares CPU time: on a shared
/// VM a call long enough to be preempted has a wall time that swings with
/// the other tenants' load while its CPU time does not, and the CPU clock's
/// own cost (a system call of a few microseconds, read outside the timed
/// window but inside the thread's CPU time) is below 0.5% of such a call.
pub const CPU_CLOCK_FROM_NS: f64 = 1e6;
