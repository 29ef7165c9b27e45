//! What one evaluation of a configuration measured, and where its time went.

use serde::Serialize;

/// What one timing of one configuration produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Time per call the driver reported (lower is better).
    pub time_ns: f64,
    pub mflops: Option<f64>,
    /// Every sample's time per call (empty when the objective has none).
    pub samples_ns: Vec<f64>,
    /// The driver's stated uncertainty of `time_ns` in per cent (how far
    /// the halves of its samples disagree), when it states one.
    pub uncertainty_pct: Option<f64>,
    /// Where the evaluation's time went, when the objective knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<TimeSplit>,
    /// Why its timing ended (all passes, or stopped by racing), when the
    /// objective times in passes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Where an evaluation's wall time went, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TimeSplit {
    /// Compiling and linking the driver (objects the cache held are free).
    pub build_s: f64,
    /// The driver taking its samples, the flushes between them included.
    pub sampling_s: f64,
    /// Of that, the cache preparation before each single-call sample.
    pub flush_s: f64,
    /// The whole evaluation: the rest is starting the driver, filling its
    /// operands, choosing the repetition count, verifying, reporting.
    pub total_s: f64,
}

impl TimeSplit {
    pub fn add(&mut self, other: &TimeSplit) {
        self.build_s += other.build_s;
        self.sampling_s += other.sampling_s;
        self.flush_s += other.flush_s;
        self.total_s += other.total_s;
    }

    /// What is neither building nor sampling.
    pub fn other_s(&self) -> f64 {
        (self.total_s - self.build_s - self.sampling_s).max(0.0)
    }
}
