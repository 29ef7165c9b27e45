//! `--auto-delay` (seed 003, section 3.2): capture at delay 0, 1, 2, ... and
//! stop when two successive delays agree within a threshold.

use crate::capture::{capture, CaptureRequest};
use crate::criu::Criu;
use crate::error::{CheckpointError, Result};
use crate::stats::{relative_difference, SampleStats};
use crate::timing::{time_image, TimeOptions};
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct AutoDelayRequest {
    /// `delay` is ignored; every delay from 0 is tried.
    pub capture: CaptureRequest,
    pub samples: usize,
    /// Successive medians agreeing within this fraction stop the search.
    pub threshold: f64,
    pub max_delay: u64,
    pub time: TimeOptions,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DelayRow {
    pub delay: u64,
    pub region_ns: SampleStats,
    /// Median relative to the previous delay's median.
    pub change_from_previous: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AutoDelayReport {
    pub rows: Vec<DelayRow>,
    pub chosen: u64,
    pub converged: bool,
    pub threshold: f64,
    pub image: PathBuf,
}

impl AutoDelayReport {
    pub fn render_text(&self) -> String {
        let mut s = String::from("delay  median region time  min            change\n");
        for r in &self.rows {
            let change = r
                .change_from_previous
                .map(|c| format!("{:+.1}%", c * 100.0))
                .unwrap_or_else(|| "-".into());
            s += &format!(
                "{:>5}  {:>18}  {:>13}  {:>6}{}\n",
                r.delay,
                crate::stats::human_ns(r.region_ns.median),
                crate::stats::human_ns(r.region_ns.min),
                change,
                if r.delay == self.chosen {
                    "  <- chosen"
                } else {
                    ""
                }
            );
        }
        if self.converged {
            s += &format!(
                "chosen delay {} (one more call of delay changes the median by less than {:.0}%); image {}\n",
                self.chosen,
                self.threshold * 100.0,
                self.image.display()
            );
        } else {
            s += &format!(
                "no two successive delays agreed within {:.0}%; kept the largest tried ({}); image {}\n",
                self.threshold * 100.0,
                self.chosen,
                self.image.display()
            );
        }
        s
    }
}

/// Which delay to keep given medians for delays 0..n: the smallest delay
/// that one more call of delay no longer changes (within the threshold): the
/// replayed calls have rebuilt the cache state by then, and it is the
/// cheapest such delay. None when no successive pair agrees.
pub fn choose_delay(medians: &[f64], threshold: f64) -> Option<usize> {
    (1..medians.len())
        .find(|&k| relative_difference(medians[k], medians[k - 1]) <= threshold)
        .map(|k| k - 1)
}

pub fn auto_delay(req: &AutoDelayRequest, criu: &Criu) -> Result<AutoDelayReport> {
    if !(req.threshold > 0.0 && req.threshold < 1.0) {
        return Err(CheckpointError::InvalidRequest(
            "--threshold is a fraction between 0 and 1 (e.g. 0.05 for 5%)".into(),
        ));
    }
    let last = req.max_delay.min(req.capture.call.saturating_sub(1));
    if last == 0 {
        return Err(CheckpointError::InvalidRequest(format!(
            "--auto-delay needs room to delay: use --call > 1 (got --call {})",
            req.capture.call
        )));
    }
    let final_image = req.capture.image.clone();
    let trial = |k: u64| {
        let mut p = final_image.clone().into_os_string();
        p.push(format!(".delay{k}"));
        PathBuf::from(p)
    };
    let mut rows: Vec<DelayRow> = Vec::new();
    let mut chosen = None;
    let tried = trial_delays(req, criu, last, &trial, &mut rows, &mut chosen);
    // Timed trial images go whether or not every trial worked, so a failed
    // search does not leave an image per delay behind; the failing trial's
    // directory stays, as the error names the CRIU log in it. CRIU reopens
    // an image directory at its captured path, so a trial image cannot be
    // renamed into place either: the chosen delay is captured once more.
    for row in &rows {
        let _ = std::fs::remove_dir_all(trial(row.delay));
    }
    tried?;
    let converged = chosen.is_some();
    let chosen = chosen.unwrap_or(last);
    let mut c = req.capture.clone();
    c.delay = chosen;
    capture(&c, criu)?;
    Ok(AutoDelayReport {
        rows,
        chosen,
        converged,
        threshold: req.threshold,
        image: final_image,
    })
}

/// Capture and time delays 0..=last into `rows` until two successive
/// medians agree (`chosen`).
fn trial_delays(
    req: &AutoDelayRequest,
    criu: &Criu,
    last: u64,
    trial: &dyn Fn(u64) -> PathBuf,
    rows: &mut Vec<DelayRow>,
    chosen: &mut Option<u64>,
) -> Result<()> {
    for k in 0..=last {
        let mut c = req.capture.clone();
        c.delay = k;
        c.image = trial(k);
        capture(&c, criu)?;
        let mut t = req.time.clone();
        t.samples = req.samples;
        t.criu = Some(criu.clone());
        let report = time_image(&c.image, &t)?;
        let change = rows
            .last()
            .map(|prev| (report.region_ns.median - prev.region_ns.median) / prev.region_ns.median);
        rows.push(DelayRow {
            delay: k,
            region_ns: report.region_ns,
            change_from_previous: change,
        });
        let medians: Vec<f64> = rows.iter().map(|r| r.region_ns.median).collect();
        if let Some(k) = choose_delay(&medians, req.threshold) {
            *chosen = Some(k as u64);
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::choose_delay;

    #[test]
    fn chooses_smallest_delay_one_more_call_no_longer_changes() {
        // cold, warming, warm, warm
        assert_eq!(choose_delay(&[4.0, 1.3, 1.02, 1.0], 0.05), Some(2));
        assert_eq!(choose_delay(&[4.0, 3.0], 0.05), None);
        assert_eq!(choose_delay(&[1.0, 1.01], 0.05), Some(0));
    }
}
