//! `tdg autotune`: a program made faster, and proven faster in the program.
//!
//! The routine a spec names is profiled inside the unmodified program
//! (the spec's `LD_PRELOAD` shim), the call contexts that hold most of its
//! time are chosen ([`choose`]), each gets a target that is shown to time
//! the routine as the program does, the candidate is tuned on the time the
//! program would spend, the chosen configurations are deployed in front of
//! the original routine ([`deploy`]), and interleaved whole-program runs,
//! plain against tuned, prove the gain ([`proof`]).

pub mod choose;
pub mod deploy;
pub mod error;
pub mod fidelity;
pub mod profile;
pub mod program;
pub mod proof;
pub mod targets;

pub use error::AutotuneError;
pub mod pipeline;
pub mod readme;
pub mod record;
pub mod summary;
