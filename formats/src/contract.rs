//! The one-evaluation contract: how a run of one candidate ended, as an
//! exit status a tuner can branch on and as a T4 `invalidity` value.
//! docs/integration.md has the table; these numbers are a public interface
//! and change only with a line in its changelog. The kinds themselves are
//! the `failure` crate's, below every crate whose errors they name.

use driver_gen::RunError;
pub use failure::Failure;

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

/// How an error that ended a command classifies, looking through its chain
/// of causes (`std::error::Error::source`, which is also how a context the
/// binary wraps around an error exposes it) for one of tdg's own error types.
pub fn failure_of(e: &(dyn std::error::Error + 'static)) -> Option<Failure> {
    std::iter::successors(Some(e), |cause| cause.source()).find_map(|cause| {
        if let Some(r) = cause.downcast_ref::<RunError>() {
            r.failure()
        } else if let Some(c) = cause.downcast_ref::<checkpoint::CheckpointError>() {
            c.failure()
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

/// A usage error (exit status 2) with this message; the binary's error type
/// takes it as it takes any other error.
pub fn usage(message: impl Into<String>) -> Failed {
    Failed {
        failure: Failure::Usage,
        message: message.into(),
    }
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
    failure_of(e).map_or(EXIT_OTHER, Failure::exit_code)
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

    /// An error with a context line around it, as the binary wraps one.
    #[derive(Debug)]
    struct Context {
        context: &'static str,
        source: Box<dyn std::error::Error + 'static>,
    }

    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.context)
        }
    }

    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.source)
        }
    }

    fn wrapped(e: impl std::error::Error + 'static) -> Context {
        let inner = Context {
            context: "while timing",
            source: Box::new(e),
        };
        Context {
            context: "while tuning",
            source: Box::new(inner),
        }
    }

    #[test]
    fn errors_classify_through_the_contexts_wrapped_around_them() {
        assert_eq!(exit_status(&wrapped(RunError::TimedOut { seconds: 3 })), 5);
        let compile = RunError::ImplBuild {
            file: "k.c".into(),
            stderr: String::new(),
        };
        assert_eq!(failure_of(&wrapped(compile)), Some(Failure::Compile));
        assert_eq!(exit_status(&wrapped(usage("bad -D"))), 2);
        assert_eq!(exit_status(&usage("bad -D")), 2);
        let not_root = checkpoint::CheckpointError::NotRoot;
        assert_eq!(failure_of(&wrapped(not_root)), Some(Failure::Environment));
        let other = std::io::Error::other("disk full");
        assert_eq!(exit_status(&wrapped(other)), EXIT_OTHER);
    }
}
