//! Profiling routines inside host applications.
//!
//! - [`runtime`]: the C logging library (`tdg_instrument.h`), embedded and
//!   compiled on demand into a static and a shared library.
//! - [`interpose`]: `LD_PRELOAD` shim and `-Wl,--wrap=` object generated from
//!   a spec's routine signature.
//! - [`session`]: run a program under profiling and collect its profile.
//! - [`format`]: the versioned `.tdgp` profile file, reader and writer.
//! - [`report`]: call contexts, timeline, early/late split, table and SVG.
//! - [`contexts`]: the contexts file and the `--contexts` prediction.
//! - [`specgen`]: a spec whose `Macro` defaults are the dominant context.
//! - [`validate`]: in-app distribution vs warm and flushed driver timings.

pub mod contexts;
pub mod format;
pub mod interpose;
pub mod report;
pub mod runtime;
pub mod session;
pub mod specgen;
mod summary_json;
pub mod validate;
