//! tdg's results in the formats other tools already read, and the contract
//! an external tuner relies on when it runs `tdg run` once per candidate.
//!
//! Each module is one job: [`contract`] says how an evaluation ended (exit
//! status, T4 invalidity), [`gbench`] writes Google Benchmark JSON from run
//! reports, [`t4`] writes T4 tuning results from evaluations, [`machine`]
//! describes this machine the way Google Benchmark's context does,
//! [`output`] writes a document to stdout or atomically to a file,
//! [`run_reports`] lays out `tdg run`'s reports in the format asked for, and
//! [`tune_outcome_document`] writes `tdg tune`'s outcome as JSON;
//! [`Format`], [`json_document`] and [`table_or_json`] say what a document
//! is made of.

pub mod contract;
mod document;
pub mod gbench;
pub mod machine;
pub mod output;
pub mod run_reports;
pub mod t4;
mod tune_outcome;

pub use contract::{exit_status, Failure};
pub use document::{
    json_document, table_or_json, unsupported, DocumentError, Format, JSON_VERSION,
};
pub use output::write_document;
pub use tune_outcome::tune_outcome_document;
