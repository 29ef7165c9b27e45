//! The command-line pieces several subcommands share: the timing options,
//! the build options and the timeout, the output contract
//! (`--format`/`--out`), `-D` definitions, a candidate for restored copies,
//! flags that take a command line, and loading the spec to time. (The spec
//! language's keywords as option values are driver-gen's `cli` parsers.)

pub mod build;
pub mod candidate;
pub mod defines;
pub mod output;
pub mod spec;
pub mod timing;
pub mod words;
