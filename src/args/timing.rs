//! The timing options `tdg gen`, `run`, `explain` and `tune` share: the
//! command line parses straight into driver-gen's `TimingOverrides` (the
//! inputs of its `resolve`), beside the flush sizes and the `-D` values.

use super::defines::define;
use driver_gen::{RunOptions, TimingOverrides};

/// Timing configuration shared by `tdg gen`, `tdg run`, `tdg explain` and
/// `tdg tune`.
#[derive(clap::Args, Clone)]
pub struct TimingArgs {
    #[command(flatten)]
    pub overrides: TimingOverrides,
    /// Flush size(s) in KiB; several (comma-separated) run a flush sweep.
    #[arg(long = "flush-kb", alias = "flush-kib", value_parser = flush_sizes)]
    #[arg(help_heading = "Timing")]
    pub flush_kb: Option<FlushSizes>,
    /// Define a size macro, e.g. -D NS=4096 (repeatable).
    #[arg(short = 'D', value_name = "NAME=VALUE", value_parser = define)]
    #[arg(help_heading = "Build")]
    pub define: Vec<(String, String)>,
}

/// `--flush-kb`: one flush size, or several for a sweep of one build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlushSizes {
    One(u64),
    Sweep(Vec<u64>),
}

fn flush_sizes(text: &str) -> Result<FlushSizes, String> {
    let sizes = text
        .split(',')
        .map(|s| s.trim().parse::<u64>())
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|_| {
            format!("`{text}` is not a size in KiB or a comma-separated list of them; e.g. 1024 or 0,256,4096")
        })?;
    Ok(match sizes.as_slice() {
        [one] => FlushSizes::One(*one),
        _ => FlushSizes::Sweep(sizes),
    })
}

impl TimingArgs {
    /// The sizes of a flush sweep (`--flush-kb A,B,...`), if one was asked for.
    pub fn sweep(&self) -> Option<&[u64]> {
        match &self.flush_kb {
            Some(FlushSizes::Sweep(kibs)) => Some(kibs),
            _ => None,
        }
    }

    /// Sets `o`'s timing from these options (a sweep's build takes its first
    /// size) and its machine from this machine's defaults: the one place a
    /// machine probe may start (and says so). The defines are the caller's:
    /// `tdg run` adds `TDG_PARAM_*` to them.
    pub fn apply(&self, o: &mut RunOptions) {
        o.timing = TimingOverrides {
            flush_kib: match &self.flush_kb {
                Some(FlushSizes::One(kib)) => Some(*kib),
                Some(FlushSizes::Sweep(kibs)) => kibs.first().copied(),
                None => None,
            },
            tolerance: o.timing.tolerance,
            ..self.overrides.clone()
        };
        o.machine = Some(driver_gen::machine_defaults());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_flush_size_is_a_size_and_several_a_sweep() {
        assert_eq!(flush_sizes("1024").unwrap(), FlushSizes::One(1024));
        assert_eq!(
            flush_sizes("0,256, 4096").unwrap(),
            FlushSizes::Sweep(vec![0, 256, 4096])
        );
        assert!(flush_sizes("1M").unwrap_err().contains("size in KiB"));
    }
}
