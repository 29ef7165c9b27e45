//! What a driver model is built under besides the spec: the timing the
//! command line imposes and the machine's defaults.

use crate::defaults::MachineDefaults;
use spec_lang::ast::{CodeOffset, FlushMethod, Selection, TimerMethod};

/// Timing settings the command line (or a caller) imposes; `None` falls
/// back to the spec's `timer={...}`, then to the machine defaults. One
/// struct from `tdg`'s options through `RunOptions` to the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingOverrides {
    pub timer: Option<TimerMethod>,
    pub samples: Option<u32>,
    pub selection: Option<Selection>,
    pub flush: Option<FlushMethod>,
    pub flush_kib: Option<u64>,
    /// Flush sized from this cache level (overrides the spec, not flush_kib).
    pub flush_level: Option<u8>,
    pub min_interval_ns: Option<u64>,
    /// Spread the samples over at least this much wall time (ms).
    pub min_time_ms: Option<u64>,
    /// Stop sampling here even if the figure has not settled (ms).
    pub max_time_ms: Option<u64>,
    /// The halves of the run must agree within this many per cent.
    pub stable_pct: Option<f64>,
    pub flush_all_cpus: bool,
    /// Pin the driver to these CPUs: thread k of the routine to the k-th.
    pub pin_cpus: Vec<u32>,
    /// The routine's team size (`--threads`; `None`: the spec's, else 1).
    pub threads: Option<u32>,
    /// Leave the operands' first touch to the main thread even when the
    /// routine runs on several (`--first-touch main`).
    pub first_touch_main: bool,
    /// Bytes past a 4096-byte boundary where the routine's code starts.
    pub code_offset: Option<CodeOffset>,
    /// Relative tolerance for verification; `None`: per element type.
    pub tolerance: Option<f64>,
}

/// Everything the model is built under besides the spec (whose `-D`
/// values the [`CheckedSpec`] already holds).
#[derive(Debug, Clone)]
pub struct DriverConfig {
    pub timing: TimingOverrides,
    pub machine: MachineDefaults,
    /// Outputs are compared with another implementation's (`--reference
    /// K.c`) instead of the spec's body.
    pub external_reference: bool,
}

impl DriverConfig {
    pub fn new(machine: MachineDefaults) -> Self {
        DriverConfig {
            timing: TimingOverrides::default(),
            machine,
            external_reference: false,
        }
    }
}
