//! The one-evaluation contract: how a run of one candidate ended, as an
//! exit status a tuner can branch on and as a T4 `invalidity` value.
//! docs/integration.md has the table; these numbers are a public interface
//! and change only with a line in its changelog.

use driver_gen::RunError;

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

/// Exit status of a run that finished and reported a time.
pub const EXIT_SUCCESS: u8 = 0;
/// Exit status of any failure the contract does not name.
pub const EXIT_OTHER: u8 = 1;
/// Exit status of a check that answered no (`tdg probe --check`: the cached
/// result does not hold or there is none; `tdg fmt --check`: a file is not
/// in canonical layout): nothing failed, but the answer is not yes.
pub const EXIT_CHECK_SAID_NO: u8 = 8;

/// One row of the exit-status table every command shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatusRow {
    pub code: u8,
    pub meaning: &'static str,
    /// The T4 `invalidity` of a tuning evaluation that ends this way.
    pub t4_invalidity: Option<&'static str>,
    /// What a script or tuner calling tdg should do.
    pub then: &'static str,
}

/// The one table of tdg's exit statuses: `tdg --help` prints it
/// ([`exit_status_help`]) and docs/integration.md holds it
/// ([`exit_status_markdown`]); a test checks that both agree with this.
pub fn exit_status_table() -> Vec<ExitStatusRow> {
    let row = |code, meaning, t4_invalidity, then| ExitStatusRow {
        code,
        meaning,
        t4_invalidity,
        then,
    };
    let mut rows = vec![
        row(
            EXIT_SUCCESS,
            "success (`--cost-only`: the time is on stdout)",
            Some("correct"),
            "use it",
        ),
        row(
            EXIT_OTHER,
            "any other failure (I/O, a damaged file)",
            None,
            "stop and look",
        ),
    ];
    rows.extend(Failure::ALL.iter().map(|f| {
        let (meaning, then) = f.explained();
        row(f.exit_code(), meaning, Some(f.t4_invalidity()), then)
    }));
    rows.push(row(
        EXIT_CHECK_SAID_NO,
        "a check said no: `tdg probe --check` (the cached result does not hold, or there is none), `tdg fmt --check` (a file is not in canonical layout), `tdg checkpoint validate` (the image does not match its application, or the rounds could not decide)",
        None,
        "act on the message (`tdg probe --force`, `tdg fmt FILE`, a longer `--delay`)",
    ));
    rows
}

/// The table as the footer of `tdg --help`.
pub fn exit_status_help() -> String {
    let mut s = String::from("Exit status (docs/integration.md):\n");
    for r in exit_status_table() {
        s.push_str(&format!("  {}  {}\n", r.code, r.meaning.replace('`', "")));
    }
    s.trim_end().to_string()
}

/// The table as docs/integration.md holds it (Markdown).
pub fn exit_status_markdown() -> String {
    let mut s = String::from(
        "| exit status | meaning | T4 `invalidity` | a tuner or script should |\n|---|---|---|---|\n",
    );
    for r in exit_status_table() {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.code,
            r.meaning,
            r.t4_invalidity
                .map_or("-".to_string(), |t| format!("`{t}`")),
            r.then
        ));
    }
    s
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
    fn explained(self) -> (&'static str, &'static str) {
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

    /// How a driver run failed; `None` for I/O errors that say nothing
    /// about the candidate.
    pub fn of_run_error(e: &RunError) -> Option<Failure> {
        Some(match e {
            RunError::Model(_) | RunError::Render(_) | RunError::Placement(_) => Failure::Usage,
            RunError::Toolchain(_) => Failure::Environment,
            RunError::ImplBuild { .. } | RunError::DriverBuild { .. } => Failure::Compile,
            RunError::Crashed { .. }
            | RunError::DriverFailed { .. }
            | RunError::BadOutput { .. } => Failure::Crash,
            RunError::TimedOut { .. } => Failure::Timeout,
            RunError::VerificationFailed { .. } => Failure::Verification,
            RunError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => Failure::Usage,
            RunError::Files(e) if fsguard::is_refusal(e) => Failure::Usage,
            RunError::Io(_) | RunError::Files(_) => return None,
        })
    }

    /// How a checkpoint timing failed: a missing or too old CRIU, no root
    /// or no util-linux is the machine; a copy that failed is the program.
    pub fn of_checkpoint_error(e: &checkpoint::CheckpointError) -> Option<Failure> {
        use checkpoint::CheckpointError as C;
        Some(match e {
            C::CriuNotFound { .. }
            | C::CriuTooOld { .. }
            | C::CriuBroken { .. }
            | C::LibcriuNotFound { .. }
            | C::NotRoot
            | C::NoUtilLinux { .. }
            | C::Toolchain(_) => Failure::Environment,
            // A candidate that crashed, did not load (an unresolved symbol)
            // or was never called in a restored copy fails at run time.
            C::CopyFailed { .. } | C::CopyReported { .. } => Failure::Crash,
            C::CandidateBuild { .. } => Failure::Compile,
            C::NotCaptured(_)
            | C::BadImage { .. }
            | C::BinaryChanged { .. }
            | C::InvalidRequest(_) => Failure::Usage,
            C::Criu { .. } | C::Io { .. } | C::Files(_) => return None,
        })
    }

    /// How an error that ended a command classifies, looking through its
    /// chain of causes (`anyhow`'s context included) for one of tdg's own
    /// error types.
    pub fn of_error(e: &(dyn std::error::Error + 'static)) -> Option<Failure> {
        std::iter::successors(Some(e), |cause| cause.source()).find_map(|cause| {
            if let Some(r) = cause.downcast_ref::<RunError>() {
                Failure::of_run_error(r)
            } else if let Some(c) = cause.downcast_ref::<checkpoint::CheckpointError>() {
                Failure::of_checkpoint_error(c)
            } else if cause.is::<spec_lang::Diagnostics>()
                || cause.is::<driver_gen::model::ModelError>()
            {
                Some(Failure::Usage)
            } else if let Some(d) = cause.downcast_ref::<crate::DocumentError>() {
                matches!(d, crate::DocumentError::Unsupported(_)).then_some(Failure::Usage)
            } else {
                cause.downcast_ref::<Failed>().map(|f| f.failure)
            }
        })
    }
}

/// An error a command raises with its failure kind attached (a `-D` value
/// that is not a C identifier is a usage error, for example).
#[derive(Debug)]
pub struct Failed {
    pub failure: Failure,
    pub message: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failed {}

/// A usage error (exit status 2) with this message.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Failed {
        failure: Failure::Usage,
        message: message.into(),
    }
    .into()
}

/// Environment variables that name a candidate's parameters:
/// `TDG_PARAM_NB=64` is `-D NB=64`. Names that are not C identifiers and
/// values that are not text are skipped, as an unrelated variable would be.
pub fn params_from_env(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.to_str()?.strip_prefix(PARAM_ENV_PREFIX)?.to_string();
            let c_identifier = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
            c_identifier.then_some((name, v.to_str()?.to_string()))
        })
        .collect();
    // The environment's order is arbitrary; the build's should not be.
    params.sort();
    params
}

/// Prefix of the environment variables [`params_from_env`] reads.
pub const PARAM_ENV_PREFIX: &str = "TDG_PARAM_";

/// The exit status for an error that ended a command.
pub fn exit_status(e: &(dyn std::error::Error + 'static)) -> u8 {
    Failure::of_error(e).map_or(EXIT_OTHER, Failure::exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_has_its_own_status_and_none_is_success_or_other() {
        let mut codes: Vec<u8> = Failure::ALL.iter().map(|f| f.exit_code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), Failure::ALL.len());
        assert!(!codes.contains(&EXIT_SUCCESS) && !codes.contains(&EXIT_OTHER));
    }

    #[test]
    fn the_status_table_has_each_code_once_in_order() {
        let codes: Vec<u8> = exit_status_table().iter().map(|r| r.code).collect();
        assert_eq!(codes, (0..=EXIT_CHECK_SAID_NO).collect::<Vec<u8>>());
        let md = exit_status_markdown();
        assert_eq!(md.lines().count(), codes.len() + 2);
        assert!(exit_status_help().contains("  8  a check said no"));
    }

    #[test]
    fn parameters_come_from_prefixed_variables_only() {
        let vars = [
            ("TDG_PARAM_NB", "64"),
            ("PATH", "/bin"),
            ("TDG_PARAM_1X", "2"),
            ("TDG_PARAM_MU", "4"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        assert_eq!(
            params_from_env(vars),
            vec![
                ("MU".to_string(), "4".to_string()),
                ("NB".into(), "64".into())
            ]
        );
    }

    #[test]
    fn run_errors_classify_through_anyhow_context() {
        let e = anyhow::Error::from(RunError::TimedOut { seconds: 3 }).context("while tuning");
        assert_eq!(exit_status(&*e), 5);
        let e = anyhow::Error::from(RunError::ImplBuild {
            file: "k.c".into(),
            stderr: String::new(),
        });
        assert_eq!(Failure::of_error(&*e), Some(Failure::Compile));
        assert_eq!(exit_status(&*anyhow::anyhow!("something else")), EXIT_OTHER);
        assert_eq!(exit_status(&*usage("bad -D")), 2);
    }
}
