//! The options that build a routine's implementation, declared once for
//! every command that compiles one (`run`, `tune`, `validate`, a
//! checkpoint's candidate), and how long one run of it may take.

use super::words::{words, Words};
use std::time::Duration;

/// `--cc` and `--cflags`: the compiler and the implementation's flags.
#[derive(clap::Args, Clone, Debug)]
pub struct BuildArgs {
    /// C compiler (default: $CC, cc, gcc, clang).
    #[arg(long)]
    pub cc: Option<String>,
    /// Flags for the implementation, split as a shell would, e.g.
    /// --cflags "-O3 -DMSG='\"a b\"'".
    #[arg(long, allow_hyphen_values = true, default_value = "-O2", value_parser = words)]
    pub cflags: Words,
}

/// `--timeout`: how long one driver run (or one restore) may take.
#[derive(clap::Args, Clone, Debug)]
pub struct TimeoutArgs {
    /// Stop a driver run (or one restore) after this many seconds.
    #[arg(long = "timeout", value_name = "TIMEOUT", default_value_t = 600, value_parser = toolchain::time_limit_secs)]
    pub seconds: u64,
}

impl TimeoutArgs {
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}
