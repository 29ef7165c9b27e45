//! What can go wrong compiling or running a program, each said in one line
//! with its cause and the way out.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("no C compiler found (tried {tried}); install gcc (`apt-get install gcc`) or pass --cc / set CC")]
    NoCompiler { tried: String },
    #[error("C compiler `{cc}` could not be started: {source}")]
    Spawn {
        cc: String,
        #[source]
        source: std::io::Error,
    },
    #[error("compilation failed: {command}\n{stderr}")]
    BuildFailed { command: String, stderr: String },
    #[error("`{program}` could not be started: {source}")]
    RunSpawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` was killed by {signal_name} (signal {signal}){context}")]
    Crashed {
        program: String,
        signal: i32,
        signal_name: &'static str,
        /// What the program last said on stderr, prefixed with "; " when present.
        context: String,
        stdout: String,
        stderr: String,
    },
    #[error("`{program}` exited with status {code}: {stderr}")]
    Failed {
        program: String,
        code: i32,
        stdout: String,
        stderr: String,
    },
    #[error("`{program}` did not finish within {} and was killed with every process it started (its process group); raise the time limit (--timeout) if it needs longer", limit_text(.limit))]
    TimedOut { program: String, limit: Duration },
    /// The build cache cannot be used; the message names the way out.
    #[error("{0}")]
    Cache(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A file or directory tdg writes (fsguard's message names the path:
    /// a directory tdg refuses to write into, or the call that failed).
    #[error("{0}")]
    Files(std::io::Error),
}

/// Names what failed in an I/O error's message, keeping its kind:
/// `.map_err(io_context(format!("writing {}", path.display())))`.
pub fn io_context(what: String) -> impl FnOnce(std::io::Error) -> std::io::Error {
    move |e| std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A time limit as messages print it: whole seconds, or milliseconds below one.
pub fn limit_text(limit: &Duration) -> String {
    if limit.as_millis() < 1000 {
        format!("{} ms", limit.as_millis())
    } else if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{:.1} s", limit.as_secs_f64())
    }
}
