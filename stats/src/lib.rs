//! Summarising samples and printing quantities with units: the one place
//! every crate that times something (drivers, profiles, checkpoints, the
//! probe, tuning) takes its min/median/mean and its "1.500 us" from, so two
//! outputs of tdg never disagree about the same numbers.

mod interval;
mod summary;
mod units;

pub use interval::{halves_disagreement, median_interval, MedianInterval};
pub use summary::{relative_difference, Summary};
pub use units::{bytes, ns};
