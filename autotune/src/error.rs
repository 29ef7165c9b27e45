//! Why `tdg autotune` stopped, each kind with its place in the contract's
//! exit statuses (docs/integration.md).

use crate::deploy::DeployError;
use crate::program::ProgramError;
use crate::proof::ProofError;
use failure::Failure;

#[derive(Debug, thiserror::Error)]
pub enum AutotuneError {
    /// The command line asks for something that cannot be done.
    #[error("{0}")]
    Usage(String),
    /// The user's program itself fails, untouched by tdg's routine.
    #[error("`{program}` {how}; autotune needs a program that runs to a successful end (check the command after `--`)")]
    ProgramFailed { program: String, how: String },
    #[error(transparent)]
    Program(#[from] ProgramError),
    #[error("profiling the program: {0}")]
    Profile(String),
    #[error(transparent)]
    Session(#[from] instrument::session::SessionError),
    #[error(transparent)]
    Interpose(#[from] instrument::interpose::InterposeError),
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error(transparent)]
    Driver(#[from] driver_gen::RunError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
    #[error(transparent)]
    Deploy(#[from] DeployError),
    #[error(transparent)]
    Proof(#[from] ProofError),
    /// No context has a target shown to time the routine as the program
    /// does: nothing can be tuned on the program's time.
    #[error("no chosen context has a faithful target ({0}); see the contexts above, and `tdg validate` or `tdg checkpoint validate` for one of them")]
    NoFaithfulTarget(String),
    /// A search (`tdg tune --contexts`) failed.
    #[error("{message}")]
    Search {
        failure: Option<Failure>,
        message: String,
    },
    #[error("{0}")]
    Files(#[from] std::io::Error),
}

impl AutotuneError {
    /// The contract's failure kind (None: exit status 1).
    pub fn failure(&self) -> Option<Failure> {
        use AutotuneError as A;
        Some(match self {
            A::Usage(_) | A::Interpose(_) => Failure::Usage,
            A::ProgramFailed { .. } => Failure::Crash,
            A::Program(ProgramError::TimedOut { .. }) => Failure::Timeout,
            A::Program(ProgramError::Spawn { .. }) => Failure::Usage,
            A::Session(instrument::session::SessionError::TimedOut { .. }) => Failure::Timeout,
            A::Session(instrument::session::SessionError::Unresolved(_)) => Failure::Usage,
            A::Toolchain(_) => Failure::Environment,
            A::Driver(e) => return e.failure(),
            A::Checkpoint(e) => return e.failure(),
            A::Deploy(DeployError::Variant { .. } | DeployError::NoDefinition { .. }) => {
                Failure::Compile
            }
            A::Deploy(DeployError::NoBinutils { .. }) => Failure::Environment,
            A::Proof(ProofError::OutputChanged { .. }) => Failure::Verification,
            A::Proof(ProofError::TunedFailed { .. } | ProofError::PlainFailed { .. }) => {
                Failure::Crash
            }
            A::Proof(ProofError::Run(ProgramError::TimedOut { .. })) => Failure::Timeout,
            A::Search { failure, .. } => return *failure,
            _ => return None,
        })
    }
}
