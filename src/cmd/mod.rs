//! One module per subcommand: its clap `Args` and `run`.
//! A command returns the exit code it wants; `Err` is printed as one
//! `tdg: error: ...` line by `main`.

pub mod autotune;
pub mod check;
pub mod checkpoint;
pub mod doctor;
pub mod explain;
pub mod fmt;
pub mod gen;
pub mod instrument;
pub mod probe;
pub mod profile;
pub mod report;
pub mod run;
pub mod spec_from_profile;
pub mod tune;
pub mod validate;

pub type CmdResult = anyhow::Result<std::process::ExitCode>;
