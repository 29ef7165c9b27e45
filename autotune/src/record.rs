//! `autotune.json`: what one `tdg autotune` found, versioned. The program,
//! its profile and the routine's share of its time, each chosen context
//! with its target and that target's fidelity, the searches, the
//! configuration each context runs, the prediction and the proof. `tdg
//! report` draws it; `tdg autotune --resume` reads the steps it can reuse.

use crate::profile::ProgramProfile;
use crate::proof::Proof;
use crate::targets::ContextTarget;
use config::Config;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const FORMAT_NAME: &str = "tdg-autotune";
pub const FORMAT_VERSION: u32 = 1;
/// The record's name in a deployment directory.
pub const RECORD_FILE: &str = "autotune.json";

/// One search: what it was over, what it chose, what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// "all contexts", or the one context it specialised for.
    pub over: String,
    /// Its best: the one its final re-timing named, or, for a search whose
    /// finalists were re-timed against the program's original instead,
    /// the finalist that re-timing chose.
    pub best: Config,
    /// Configurations the final re-timing could not tell from `best`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tied: Vec<Config>,
    /// The search's best by its own times, in that order, when they were
    /// re-timed against the original rather than among themselves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalists: Vec<Config>,
    /// The program's predicted time in the routine over `over`, ns.
    pub best_ns: f64,
    pub evaluations: usize,
    pub seconds: f64,
    /// Its evaluation log and campaign directory.
    pub log: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<PathBuf>,
}

/// What one tuned context runs in the deployed routine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextChoice {
    pub rank: usize,
    pub label: String,
    pub config: Config,
    /// The context's own best, when the specialisation paid.
    pub specialised: bool,
    /// The target's predicted time per call of the original and of the
    /// chosen configuration (fidelity-corrected), re-timed side by side.
    pub original_ns: f64,
    pub chosen_ns: f64,
    /// The context's best against the all-contexts configuration, per
    /// re-timing round, with its interval (None: the same configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialised_over_joint: Option<crate::proof::Speedup>,
}

/// The program's time predicted from the targets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub program_s: f64,
    /// The plain median over `program_s`.
    pub speedup: f64,
    /// Of the routine's time, the share the tuned contexts hold.
    pub tuned_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    pub dir: PathBuf,
    pub preload_library: PathBuf,
    pub wrap_archive: PathBuf,
    pub symbol: String,
    pub variants: Vec<Config>,
    /// Variants whose code the library could not start where the drivers
    /// timed it (a fetch-block placement can move a kernel's speed, so
    /// the prediction may not hold for them), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub misplaced: Vec<String>,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The program is measurably faster with the tuned routine.
    Faster,
    /// It is not (no gain, slower, or undecided): the deployment is there,
    /// but not worth using.
    NotFaster,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub format: String,
    pub version: u32,
    pub routine: String,
    pub spec: PathBuf,
    pub implementation: PathBuf,
    pub program: Vec<String>,
    pub cwd: PathBuf,
    /// `model name` of this machine's CPU, and when.
    pub host: String,
    pub date: String,
    pub profile: ProgramProfile,
    /// The share of the routine's time asked for and reached.
    pub cover_asked: f64,
    pub cover_reached: f64,
    pub contexts: Vec<ContextTarget>,
    pub searches: Vec<SearchRecord>,
    pub choices: Vec<ContextChoice>,
    pub prediction: Prediction,
    pub deployment: Deployment,
    pub proof: Proof,
    pub outcome: Outcome,
    /// Seconds each step took.
    pub step_seconds: Vec<(String, f64)>,
}

impl Record {
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(RECORD_FILE);
        let text = serde_json::to_string_pretty(self).expect("plain data serialises") + "\n";
        fsguard::write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    /// A record read back (`tdg report`); its format and version checked.
    pub fn parse(text: &str, path: &str) -> Result<Record, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("{path}: not JSON ({e})"))?;
        Record::from_value(value).map_err(|why| format!("{path}: {why}"))
    }

    /// A record from its JSON; its format and version checked.
    pub fn from_value(value: serde_json::Value) -> Result<Record, String> {
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
            return Err("not a tdg autotune record".into());
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != u64::from(FORMAT_VERSION) {
            return Err(format!(
                "autotune record version {version}; this tdg reads {FORMAT_VERSION}"
            ));
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

/// This machine's CPU model, from /proc/cpuinfo.
pub fn host_cpu() -> String {
    probe::documented::cpuinfo_model().unwrap_or_else(|| "unknown CPU".into())
}
