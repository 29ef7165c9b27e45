//! What can end a search or fail a configuration, and the contract's name
//! for each failure.

use failure::Failure;

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("--param {text}: {why}")]
    BadParam { text: String, why: String },
    #[error("constraint `{text}`: {why}")]
    BadConstraint { text: String, why: String },
    #[error("--start {text}: {why}")]
    BadStart { text: String, why: String },
    #[error("--role {text}: {why}")]
    BadRole { text: String, why: String },
    #[error("nothing to tune: give at least one --param NAME=LO:HI[:STEP]")]
    EmptySpace,
    #[error("{0}")]
    Objective(String),
    /// A configuration failed in a way the contract names (it did not
    /// compile, crashed, timed out, computed wrong results).
    #[error("{message}")]
    Failed {
        failure: failure::Failure,
        message: String,
    },
    #[error(
        "none of the {tried} configurations tried could be built and timed; the last error: {last}"
    )]
    NothingWorked { tried: usize, last: String },
    /// The executor failed (the cluster, not the configuration): the
    /// search stops rather than recording configurations as failed.
    #[error("{0}")]
    Executor(String),
    #[error("writing the evaluation log failed: {0}")]
    Log(std::io::Error),
    /// A resumed campaign's inputs changed since it started, and the
    /// resume did not accept that.
    #[error("{0}")]
    InputsChanged(String),
    /// Another tdg holds the campaign (a second, concurrent `--resume`):
    /// nothing is wrong with the request, it cannot run now.
    #[error("{0}")]
    CampaignInUse(String),
    /// The checkpoint target could not be opened (its image, CRIU).
    #[error("{0}")]
    Checkpoint(::checkpoint::CheckpointError),
}

impl TuneError {
    /// The contract's name for a configuration's failure, when known.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            TuneError::Failed { failure, .. } => Some(*failure),
            TuneError::Checkpoint(e) => e.failure(),
            TuneError::CampaignInUse(_) => Some(Failure::Environment),
            TuneError::InputsChanged(_) => Some(Failure::Usage),
            TuneError::BadParam { .. }
            | TuneError::BadConstraint { .. }
            | TuneError::BadRole { .. }
            | TuneError::BadStart { .. }
            | TuneError::EmptySpace => Some(Failure::Usage),
            _ => None,
        }
    }
}
