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
    Session(Box<instrument::session::SessionError>),
    #[error(transparent)]
    Interpose(Box<instrument::interpose::InterposeError>),
    #[error(transparent)]
    Toolchain(Box<toolchain::ToolchainError>),
    #[error(transparent)]
    Driver(Box<driver_gen::RunError>),
    #[error(transparent)]
    Checkpoint(Box<checkpoint::CheckpointError>),
    #[error(transparent)]
    Deploy(Box<DeployError>),
    #[error(transparent)]
    Proof(Box<ProofError>),
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
        use instrument::session::SessionError;
        use AutotuneError as A;
        Some(match self {
            A::Usage(_) | A::Interpose(_) => Failure::Usage,
            A::ProgramFailed { .. } => Failure::Crash,
            A::Program(e) => return program_failure(e),
            A::Session(e) => match **e {
                SessionError::TimedOut { .. } => Failure::Timeout,
                SessionError::Unresolved(_) => Failure::Usage,
                _ => return None,
            },
            A::Toolchain(_) => Failure::Environment,
            A::Driver(e) => return e.failure(),
            A::Checkpoint(e) => return e.failure(),
            A::Deploy(e) => match **e {
                DeployError::Variant { .. } | DeployError::NoDefinition { .. } => Failure::Compile,
                DeployError::NoBinutils { .. } => Failure::Environment,
                _ => return None,
            },
            A::Proof(e) => match &**e {
                ProofError::OutputChanged { .. } => Failure::Verification,
                ProofError::TunedFailed { .. } | ProofError::PlainFailed { .. } => Failure::Crash,
                ProofError::Run(e) => return program_failure(e),
            },
            A::Search { failure, .. } => return *failure,
            _ => return None,
        })
    }
}

fn program_failure(e: &ProgramError) -> Option<Failure> {
    match e {
        ProgramError::TimedOut { .. } => Some(Failure::Timeout),
        ProgramError::Spawn { .. } => Some(Failure::Usage),
        ProgramError::Wait { .. } => None,
    }
}

impl From<instrument::session::SessionError> for AutotuneError {
    fn from(e: instrument::session::SessionError) -> Self {
        AutotuneError::Session(Box::new(e))
    }
}

impl From<instrument::interpose::InterposeError> for AutotuneError {
    fn from(e: instrument::interpose::InterposeError) -> Self {
        AutotuneError::Interpose(Box::new(e))
    }
}

impl From<toolchain::ToolchainError> for AutotuneError {
    fn from(e: toolchain::ToolchainError) -> Self {
        AutotuneError::Toolchain(Box::new(e))
    }
}

impl From<driver_gen::RunError> for AutotuneError {
    fn from(e: driver_gen::RunError) -> Self {
        AutotuneError::Driver(Box::new(e))
    }
}

impl From<checkpoint::CheckpointError> for AutotuneError {
    fn from(e: checkpoint::CheckpointError) -> Self {
        AutotuneError::Checkpoint(Box::new(e))
    }
}

impl From<DeployError> for AutotuneError {
    fn from(e: DeployError) -> Self {
        AutotuneError::Deploy(Box::new(e))
    }
}

impl From<ProofError> for AutotuneError {
    fn from(e: ProofError) -> Self {
        AutotuneError::Proof(Box::new(e))
    }
}
