//! Why one evaluation of a candidate produced no time, in the words of the
//! one-evaluation contract (docs/integration.md): each kind has its own exit
//! status, which a tuner branches on, and a T4 `invalidity` value. The
//! crates whose errors are these failures (the driver's run, a checkpoint
//! timing, the search) each say which kind an error of theirs is; the
//! numbers are a public interface and change only with a line in the
//! changelog there.

/// Why a candidate produced no time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The spec, a parameter value or the command line is wrong.
    Usage,
    /// The implementation (or the driver, with its macros) did not compile.
    Compile,
    /// The timed program crashed or exited with an error.
    Crash,
    /// The timed program ran past `--timeout` and was stopped.
    Timeout,
    /// The outputs differ from the spec's reference.
    Verification,
    /// This machine lacks something tdg needs (a C compiler, CRIU, root).
    Environment,
}

impl Failure {
    pub const ALL: [Failure; 6] = [
        Failure::Usage,
        Failure::Compile,
        Failure::Crash,
        Failure::Timeout,
        Failure::Verification,
        Failure::Environment,
    ];

    /// The process exit status. 2 is also what the argument parser exits
    /// with on a bad command line, so usage errors share it.
    pub fn exit_code(self) -> u8 {
        match self {
            Failure::Usage => 2,
            Failure::Compile => 3,
            Failure::Crash => 4,
            Failure::Timeout => 5,
            Failure::Verification => 6,
            Failure::Environment => 7,
        }
    }

    /// What the status means and what a caller should do, as the
    /// exit-status table says it.
    pub fn explained(self) -> (&'static str, &'static str) {
        const FAILED_TRIAL: &str = "record a failed trial, go on";
        match self {
            Failure::Usage => (
                "bad spec, bad parameter value or bad command line (also the argument parser's own status)",
                "stop: every candidate will fail",
            ),
            Failure::Compile => (
                "the candidate (or the driver with its macros) did not compile",
                FAILED_TRIAL,
            ),
            Failure::Crash => (
                "the candidate crashed or the driver exited with an error; `tdg profile`: the profiled program did (its own status is in the output)",
                FAILED_TRIAL,
            ),
            Failure::Timeout => ("the candidate ran past `--timeout` and was stopped", FAILED_TRIAL),
            Failure::Verification => (
                "the candidate's outputs differ from the spec's reference",
                FAILED_TRIAL,
            ),
            Failure::Environment => (
                "this machine is not ready (no C compiler, no CRIU, not root; `tdg doctor`: it cannot checkpoint; `tdg tune --resume`: another tdg holds the campaign)",
                "stop; the message (or `tdg doctor`) says what to fix",
            ),
        }
    }

    /// The T4 results schema's `invalidity` value. A parameter value the
    /// spec rejects is a violated constraint; a machine that cannot run the
    /// candidate is, to the tuner, a failure at run time.
    pub fn t4_invalidity(self) -> &'static str {
        match self {
            Failure::Usage => "constraints",
            Failure::Compile => "compile",
            Failure::Crash | Failure::Environment => "runtime",
            Failure::Timeout => "timeout",
            Failure::Verification => "correctness",
        }
    }
}
