//! The command-line pieces several subcommands share: the timing options,
//! the output contract (`--format`/`--out`), `-D` definitions, a candidate
//! for restored copies, flags that take a command line, and the spec
//! language's keywords as option values.

pub mod candidate;
pub mod defines;
pub mod keyword;
pub mod output;
pub mod timing;
pub mod words;
