//! The in-application reference: run the application plainly (no checkpoint)
//! with the region markers recording the chosen call's time.

use crate::env;
use crate::error::{io_err, CheckpointError, Result};
use stats::Summary;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct InAppRequest {
    pub command: Vec<OsString>,
    pub site: Option<String>,
    pub call: u64,
    pub runs: usize,
    pub timeout: Option<Duration>,
    /// A shim marking the region in an unmodified application (see
    /// `CaptureRequest::preload`), put first in `LD_PRELOAD`.
    pub preload: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InAppReport {
    pub site: Option<String>,
    pub call: u64,
    /// Wall-clock time of the call in each run.
    pub samples_ns: Vec<u64>,
    /// CPU time of the call in each run.
    pub samples_cpu_ns: Vec<u64>,
    #[serde(with = "crate::summary_json")]
    pub region_ns: Summary,
    #[serde(with = "crate::summary_json")]
    pub region_cpu_ns: Summary,
    /// Wall time of each whole run (the cost of one sample this way).
    #[serde(with = "crate::summary_json")]
    pub run_wall_ms: Summary,
    /// The state each run's call ran in (empty: an older host library).
    #[serde(default)]
    pub states: Vec<crate::fidelity::CallState>,
}

impl InAppReport {
    /// One line: the call's time over the plain runs, and what a run costs.
    pub fn render_text(&self) -> String {
        let r = &self.region_ns;
        format!(
            "call {} in {} plain runs ({} per run): {}\n",
            self.call,
            r.n,
            stats::ns(self.run_wall_ms.median * 1e6),
            r.ns_line()
        )
    }
}

/// Run the application `runs` times and collect the time of call `call`.
pub fn measure_in_app(req: &InAppRequest) -> Result<InAppReport> {
    measure_in_app_in(req, None)
}

/// [`measure_in_app`] with the application started in `cwd` (None: here).
pub fn measure_in_app_in(req: &InAppRequest, cwd: Option<&std::path::Path>) -> Result<InAppReport> {
    let Some((program, args)) = req.command.split_first() else {
        return Err(CheckpointError::InvalidRequest(
            "no application given".into(),
        ));
    };
    if req.call == 0 || req.runs == 0 {
        return Err(CheckpointError::InvalidRequest(
            "--call and --runs count from 1".into(),
        ));
    }
    let scratch =
        toolchain::scratch_dir("tdg-inapp").map_err(io_err("cannot create a scratch directory"))?;
    let report = scratch.path().join("region-times.txt");
    let mut walls = Vec::with_capacity(req.runs);
    let tsc_ghz = crate::tsc::region_tsc_ghz();
    for _ in 0..req.runs {
        let mut cmd = Command::new(program);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        cmd.args(args)
            .env(env::REPORT, &report)
            .env(env::CALL, req.call.to_string())
            .env_remove(env::IMAGE)
            .env_remove(env::DELAY)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match &req.site {
            Some(s) => cmd.env(env::SITE, s),
            None => cmd.env_remove(env::SITE),
        };
        if let Some(shim) = &req.preload {
            cmd.env("LD_PRELOAD", toolchain::ld_preload_with(shim));
        }
        match tsc_ghz {
            Some(g) => cmd.env(env::TSC_GHZ, g.to_string()),
            None => cmd.env_remove(env::TSC_GHZ),
        };
        let started = Instant::now();
        toolchain::run(&mut cmd, req.timeout)?;
        walls.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    let pairs: Vec<(u64, u64)> = text
        .lines()
        .filter_map(crate::hostlib::parse_result)
        .collect();
    let states: Vec<crate::fidelity::CallState> = text
        .lines()
        .filter_map(crate::fidelity::CallState::parse)
        .collect();
    let samples_ns: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let samples_cpu_ns: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    if samples_ns.len() != req.runs {
        return Err(CheckpointError::NotCaptured(format!(
            "{} of {} runs reached call {} of the region; check --site/--call and that the application \
             calls tdg_region_begin/tdg_region_end",
            samples_ns.len(),
            req.runs,
            req.call
        )));
    }
    let as_f64 = |v: &[u64]| v.iter().map(|&n| n as f64).collect::<Vec<f64>>();
    Ok(InAppReport {
        site: req.site.clone(),
        call: req.call,
        region_ns: Summary::of(&as_f64(&samples_ns)).expect("runs >= 1"),
        region_cpu_ns: Summary::of(&as_f64(&samples_cpu_ns)).expect("runs >= 1"),
        samples_cpu_ns,
        run_wall_ms: Summary::of(&walls).expect("runs >= 1"),
        samples_ns,
        states,
    })
}
