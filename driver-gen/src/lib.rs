//! Timing-driver generation: spec -> [`model::DriverModel`] -> handlebars
//! templates -> C driver; build it against the user's kernel, run, report.
//!
//! The timing methods are those of Whaley & Castaldo's ATLAS timers; see
//! `templates/driver.c.hbs` for how each one appears in the C.

pub mod body;
pub mod cexpr;
#[cfg(feature = "cli")]
pub mod cli;
pub mod contexts;
pub mod defaults;
pub mod driver_json;
pub mod driver_options;
pub mod explain;
pub mod kept;
mod keyword_json;
pub mod model;
pub mod record;
#[cfg(test)]
mod record_tests;
pub mod render;
pub mod report;
pub mod run;
mod summary_json;

pub use defaults::{machine_defaults, recorded_defaults, MachineDefaults};
pub use explain::explain;
pub use model::{DriverConfig, DriverModel, ModelError, TimingOverrides};
pub use render::{render, GeneratedDriver, RenderError};
pub use run::{
    build_driver, default_build_cache, flush_sweep, predicted_padding, run_driver, BuildStats,
    BuiltDriver, RunError, RunOptions, RunReport, CODE_PAGE,
};
