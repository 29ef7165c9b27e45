//! The command-line pieces several subcommands share: the timing options,
//! the output contract (`--format`/`--out`), `-D` definitions, a candidate
//! for restored copies, flags that take a command line, the spec
//! language's keywords as option values, and loading the spec to time.

pub mod candidate;
pub mod defines;
pub mod keyword;
pub mod output;
pub mod spec;
pub mod timing;
pub mod words;
