//! Every way checkpointing can fail, each rendered as one line with the cause
//! and a way out.

use failure::Failure;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("CRIU not found on PATH (tried {tried}); install CRIU >= 4.1 on PATH (`scripts/setup` builds one into .deps/bin: add that to PATH) or set TDG_CRIU=/path/to/criu")]
    CriuNotFound { tried: String },
    #[error("CRIU at {path} is version {version}; tdg needs >= 4.1 (older ones cannot dump on kernels with a [vvar_vclock] mapping); run `scripts/setup` or set TDG_CRIU")]
    CriuTooOld { path: PathBuf, version: String },
    #[error("`{path} --version` did not work: {detail}; reinstall CRIU with `scripts/setup` or set TDG_CRIU")]
    CriuBroken { path: PathBuf, detail: String },
    #[error("libcriu not found next to {criu} (looked in {tried}); run `scripts/setup` or set TDG_LIBCRIU=/path/to/libcriu.so")]
    LibcriuNotFound { criu: PathBuf, tried: String },
    #[error("checkpointing needs root (CRIU needs CAP_SYS_ADMIN and CAP_SYS_PTRACE); rerun as root or with sudo")]
    NotRoot,
    #[error("`{tool}` (util-linux) not found; every restore runs through it (a fresh PID namespace and session): apt-get install util-linux")]
    NoUtilLinux { tool: &'static str },
    #[error("CRIU {action} failed: {cause} (log: {log})")]
    Criu {
        action: &'static str,
        cause: String,
        log: PathBuf,
    },
    #[error("{0}")]
    NotCaptured(String),
    #[error("{path} is not a tdg checkpoint image: {reason}")]
    BadImage { path: PathBuf, reason: String },
    #[error("image {image} was captured from {exe}, which has changed since (sha256 {now}, image says {then}); recapture it with `tdg checkpoint capture`")]
    BinaryChanged {
        image: PathBuf,
        exe: PathBuf,
        then: String,
        now: String,
    },
    #[error("restored copy {sample} of {image} {detail} (log: {log})")]
    CopyFailed {
        image: PathBuf,
        sample: usize,
        detail: String,
        log: PathBuf,
    },
    #[error(
        "{what} {detail}, in {copy} of {image} (the image is unchanged and can be restored again)"
    )]
    CopyReported {
        what: String,
        detail: String,
        /// "restored copy N" or "the verification copy".
        copy: String,
        image: PathBuf,
    },
    #[error("the candidate {file} failed to compile:\n{stderr}")]
    CandidateBuild { file: PathBuf, stderr: String },
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A file tdg writes or removes (the guard's messages name the path).
    #[error("{0}")]
    Files(std::io::Error),
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
}

impl CheckpointError {
    /// The evaluation contract's kind of this failure: a missing or too old
    /// CRIU, no root or no util-linux is the machine's; a copy that failed is
    /// the program's. `None` for errors that say nothing about the candidate
    /// (CRIU itself, I/O).
    pub fn failure(&self) -> Option<Failure> {
        use CheckpointError as C;
        Some(match self {
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
}

pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

/// Attach a human context to an I/O error.
pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> CheckpointError {
    let context = context.into();
    move |source| CheckpointError::Io { context, source }
}

/// A refusal of fsguard's (a directory or file tdg did not create) is the
/// user's to act on (another `-o`); anything else is I/O.
pub(crate) fn guard_err(e: std::io::Error) -> CheckpointError {
    if fsguard::is_refusal(&e) {
        CheckpointError::InvalidRequest(e.to_string())
    } else {
        CheckpointError::Files(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_the_candidate_and_the_request_each_have_their_failure() {
        assert_eq!(
            CheckpointError::NotRoot.failure(),
            Some(Failure::Environment)
        );
        let crashed = CheckpointError::CopyFailed {
            image: "img".into(),
            sample: 2,
            detail: "was killed by SIGSEGV".into(),
            log: "restore.log".into(),
        };
        assert_eq!(crashed.failure(), Some(Failure::Crash));
        let build = CheckpointError::CandidateBuild {
            file: "k.c".into(),
            stderr: String::new(),
        };
        assert_eq!(build.failure(), Some(Failure::Compile));
        let stale = CheckpointError::BadImage {
            path: "img".into(),
            reason: "no manifest".into(),
        };
        assert_eq!(stale.failure(), Some(Failure::Usage));
        // CRIU's own failure and I/O say nothing about the candidate.
        let io = io_err("reading the manifest")(std::io::Error::other("EIO"));
        assert_eq!(io.failure(), None);
    }
}
