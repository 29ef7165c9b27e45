//! Searches implementation parameters (macros a kernel is compiled with)
//! with the generated timing driver, or restored copies of an application's
//! checkpoint ([`CheckpointObjective`]), as the objective: a model-predicted
//! start from the probe's effective cache sizes, then local search, every
//! configuration built and timed at most once and logged as JSON lines;
//! evaluated here or, one job array per round, on a Slurm cluster.

mod bayes;
pub mod campaign;
pub mod checkpoint;
pub mod contexts;
pub mod driver;
mod error;
pub mod inputs;
pub mod measurement;
pub mod model;
mod modelfree;
pub mod objectives;
pub mod outcome;
pub mod progress;
pub mod race;
pub mod replay;
pub mod roles;
pub mod run;
pub mod search;
pub mod slurm;
pub mod space;
pub mod ties;

pub use campaign::{Campaign, CampaignObjective, Executor, LocalTasks, Manifest, Prebuild};
pub use checkpoint::CheckpointObjective;
pub use contexts::{ContextsObjective, WeightedContexts};
pub use driver::DriverObjective;
pub use error::TuneError;
pub use measurement::{Measurement, TimeSplit};
pub use model::{element_bytes, starts, MachineModel, Start};
pub use roles::{parse_role, Role, RoleSource, Roles};
pub use run::{
    run, CampaignChoice, CandidateSettings, Runner, StartFrom, Strategy, Target, TargetObjective,
    TuneOutcome, TuneRequest,
};
pub use search::{Evaluation, Objective, Outcome, Placement, Progress, Tuner};
pub use slurm::{SlurmConfig, SlurmExecutor};
pub use space::{
    parse_constraint, parse_param, parse_start, ConstraintOrigin, Param, Point, Space,
    SpaceConstraint,
};
