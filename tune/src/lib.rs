//! Searches implementation parameters (macros a kernel is compiled with)
//! with the generated timing driver, or restored copies of an application's
//! checkpoint ([`CheckpointObjective`]), as the objective: a model-predicted
//! start from the probe's effective cache sizes, then local search, every
//! configuration built and timed at most once and logged as JSON lines;
//! evaluated here or, one job array per round, on a Slurm cluster.

pub mod campaign;
pub mod checkpoint;
pub mod driver;
pub mod model;
pub mod outcome;
pub mod progress;
pub mod race;
pub mod roles;
pub mod run;
pub mod search;
pub mod slurm;
pub mod space;

pub use campaign::{Campaign, CampaignObjective, Executor, LocalTasks, Manifest, Prebuild};
pub use checkpoint::CheckpointObjective;
pub use driver::{element_bytes, DriverObjective};
pub use model::{starts, MachineModel, Start};
pub use roles::{parse_role, Role, RoleSource, Roles};
pub use run::{
    run, CampaignChoice, CandidateSettings, Runner, StartFrom, Strategy, Target, TargetObjective,
    TuneOutcome, TuneRequest,
};
pub use search::{
    Evaluation, Measurement, Objective, Outcome, Placement, Progress, TimeSplit, Tuner,
};
pub use slurm::{SlurmConfig, SlurmExecutor};
pub use space::{
    parse_constraint, parse_param, parse_start, ConstraintOrigin, Param, Point, Space,
    SpaceConstraint,
};

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
        failure: formats::Failure,
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
    pub fn failure(&self) -> Option<formats::Failure> {
        match self {
            TuneError::Failed { failure, .. } => Some(*failure),
            TuneError::Checkpoint(e) => formats::Failure::of_checkpoint_error(e),
            TuneError::CampaignInUse(_) => Some(formats::Failure::Environment),
            TuneError::InputsChanged(_) => Some(formats::Failure::Usage),
            TuneError::BadParam { .. }
            | TuneError::BadConstraint { .. }
            | TuneError::BadRole { .. }
            | TuneError::BadStart { .. }
            | TuneError::EmptySpace => Some(formats::Failure::Usage),
            _ => None,
        }
    }
}
