//! `--auto-delay` (seed 003, section 3.2, made robust): capture at delays
//! growing geometrically (0, 1, 2, 4, 8, ...) and stop when two successive
//! ones agree within a threshold *and* a much larger delay confirms it. Two
//! small delays can agree on a false plateau: a pointer chase's cache state
//! can go on improving long after two neighbouring small delays read alike
//! (the test `a_false_plateau_is_not_chosen` holds such a table). When
//! the in-app time is known (plain runs timed with the markers), the
//! smallest delay that reproduces it is chosen instead, and every row shows
//! its remaining gap. With the application as the reference, each delay's
//! image is compared with plain runs of the application interleaved round
//! by round (the comparison of `checkpoint validate`), and the first delay
//! whose samples match it is kept.

use crate::capture::{capture, CaptureRequest};
use crate::criu::Criu;
use crate::error::{CheckpointError, Result};
use crate::inapp::{measure_in_app, InAppRequest};
use crate::timing::{time_image, TimeOptions};
use crate::validate::{validate, Comparison, RatioEstimate, ValidateRequest, Verdict};
use stats::{relative_difference, Summary};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct AutoDelayRequest {
    /// `delay` is ignored; the delays are chosen here.
    pub capture: CaptureRequest,
    pub samples: usize,
    /// Medians agreeing within this fraction are a plateau.
    pub threshold: f64,
    pub max_delay: u64,
    pub time: TimeOptions,
    /// What a delay's samples are held against.
    pub reference: DelayReference,
}

/// What ends the search.
#[derive(Debug, Clone, PartialEq)]
pub enum DelayReference {
    /// The next delays (the paper's rule): two successive delays agree
    /// within the threshold and a much larger one confirms it.
    Delays,
    /// The in-app median of this many plain runs, timed once before the
    /// search: the smallest delay within the threshold of it.
    InAppMedian { runs: usize },
    /// The application itself, interleaved: each delay's image against
    /// plain runs round by round, as `checkpoint validate` compares them;
    /// the first delay whose verdict is "matches" (the comparison's
    /// tolerance, not the threshold).
    Application(Comparison),
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DelayRow {
    pub delay: u64,
    #[serde(with = "crate::summary_json")]
    pub region_ns: Summary,
    /// Median relative to the previous (smaller) delay's median.
    pub change_from_previous: Option<f64>,
    /// Median relative to the in-app median, when that was measured (with
    /// the application as the reference: the rounds' ratio minus 1).
    #[serde(default)]
    pub gap_to_in_app: Option<f64>,
    /// The interleaved comparison with the application at this delay.
    #[serde(default)]
    pub against_application: Option<DelayValidation>,
}

/// One delay's image held against the application, interleaved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DelayValidation {
    /// The clock compared (CPU time from a millisecond on).
    pub clock: crate::clock::ClockChoice,
    pub rounds: usize,
    /// The compared clock's medians over every round: the image's samples
    /// and the application's plain runs.
    pub image_median_ns: f64,
    pub in_app_median_ns: f64,
    /// The rounds' ratio (image over in-app) with its interval; None with
    /// too few rounds for one.
    pub estimate: Option<RatioEstimate>,
    pub verdict: Verdict,
    /// The state around the call on both sides, and what differs.
    #[serde(default)]
    pub fidelity: Option<crate::fidelity::Fidelity>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AutoDelayReport {
    pub rows: Vec<DelayRow>,
    pub chosen: u64,
    pub converged: bool,
    /// The much larger delay that confirmed the plateau (None: no room for one,
    /// or chosen by the in-app time).
    #[serde(default)]
    pub confirmed_by: Option<u64>,
    /// The in-app median of the call, when plain runs were timed.
    #[serde(default)]
    pub in_app_ns: Option<f64>,
    /// The relative agreement that ended the search: the threshold, or the
    /// comparison's tolerance with the application as the reference.
    pub threshold: f64,
    /// The application was the reference, interleaved with each delay.
    #[serde(default)]
    pub against_application: bool,
    pub image: PathBuf,
}

impl AutoDelayReport {
    pub fn render_text(&self) -> String {
        if self.against_application {
            return self.render_against_application();
        }
        let mut s = String::from("delay  median region time  min            change  vs in-app\n");
        let pct = |v: Option<f64>| {
            v.map(|c| format!("{:+.1}%", c * 100.0))
                .unwrap_or_else(|| "-".into())
        };
        for r in &self.rows {
            s += &format!(
                "{:>5}  {:>18}  {:>13}  {:>6}  {:>9}{}\n",
                r.delay,
                stats::ns(r.region_ns.median),
                stats::ns(r.region_ns.min),
                pct(r.change_from_previous),
                pct(r.gap_to_in_app),
                if r.delay == self.chosen {
                    "  <- chosen"
                } else if Some(r.delay) == self.confirmed_by {
                    "  (confirms)"
                } else {
                    ""
                }
            );
        }
        let pct_t = self.threshold * 100.0;
        let gap = self
            .rows
            .iter()
            .find(|r| r.delay == self.chosen)
            .and_then(|r| r.gap_to_in_app);
        s += &match (self.converged, self.in_app_ns, self.confirmed_by) {
            (true, Some(t), _) => format!(
                "chosen delay {} (the smallest within {pct_t:.0}% of the in-app median {}); image {}\n",
                self.chosen,
                stats::ns(t),
                self.image.display()
            ),
            (true, None, Some(c)) => format!(
                "chosen delay {} (the next delay changes the median by less than {pct_t:.0}%, and delay {c} confirms it); image {}\n",
                self.chosen,
                self.image.display()
            ),
            (true, None, None) => format!(
                "chosen delay {} (the next delay changes the median by less than {pct_t:.0}%; no room for a larger delay to confirm it); image {}\n",
                self.chosen,
                self.image.display()
            ),
            (false, Some(_), _) => format!(
                "no delay came within {pct_t:.0}% of the in-app median; kept the closest ({}, {}); image {}\n",
                self.chosen,
                pct(gap),
                self.image.display()
            ),
            (false, None, _) => format!(
                "no confirmed plateau within {pct_t:.0}%; kept the largest delay tried ({}); image {}\n",
                self.chosen,
                self.image.display()
            ),
        };
        s
    }
}

impl AutoDelayReport {
    fn render_against_application(&self) -> String {
        let mut s = String::from(
            "delay  rounds  clock  image median  in-app median  image/in-app  interval       verdict\n",
        );
        for r in &self.rows {
            let Some(v) = &r.against_application else {
                continue;
            };
            let (ratio, interval) = match &v.estimate {
                Some(e) => (
                    format!("{:.3}", e.ratio),
                    format!("{:.3}-{:.3}", e.low, e.high),
                ),
                None => ("-".into(), "-".into()),
            };
            s += &format!(
                "{:>5}  {:>6}  {:<5}  {:>12}  {:>13}  {:>12}  {:<13}  {}{}\n",
                r.delay,
                v.rounds,
                if v.clock == crate::clock::ClockChoice::Cpu {
                    "cpu"
                } else {
                    "wall"
                },
                stats::ns(v.image_median_ns),
                stats::ns(v.in_app_median_ns),
                ratio,
                interval,
                v.verdict.word(),
                if r.delay == self.chosen {
                    "  <- chosen"
                } else {
                    ""
                }
            );
        }
        let tol = self.threshold * 100.0;
        s += &if self.converged {
            format!(
                "chosen delay {}: the smallest tried whose samples match the application within {tol:.0}% \
                 (plain runs and samples interleaved, as `tdg checkpoint validate`); image {}\n",
                self.chosen,
                self.image.display()
            )
        } else {
            let tried = self.rows.iter().map(|r| r.delay).max().unwrap_or(0);
            let closest = self
                .rows
                .iter()
                .find(|r| r.delay == self.chosen)
                .and_then(|r| r.against_application.as_ref())
                .and_then(|v| v.fidelity.as_ref());
            format!(
                "none matched: no delay up to {tried} matched the application within {tol:.0}% \
                 (past --max-delay only while each delay brought the copy nearer); kept the closest ({}); image {}\n{}",
                self.chosen,
                self.image.display(),
                closest.map_or(
                    "(raise --max-rounds, or compare on a quieter host)\n".to_string(),
                    |f| format!(
                        "at delay {}:\n{}{}",
                        self.chosen,
                        f.render_table(),
                        f.render_causes()
                    )
                )
            )
        };
        s
    }
}

/// The delays tried, in order: 0, 1, 2, 4, 8, ... up to `last` (included).
pub fn geometric_delays(last: u64) -> Vec<u64> {
    let mut out = vec![0];
    let mut k = 1;
    while k < last {
        out.push(k);
        k *= 2;
    }
    if last > 0 {
        out.push(last);
    }
    out
}

/// A delay much larger than `k` to confirm a plateau at: four times it and
/// at least 8 calls more, within `last`.
pub fn confirmation_delay(k: u64, last: u64) -> u64 {
    (k * 4).max(k + 8).min(last)
}

/// What the search settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayChoice {
    pub delay: u64,
    pub converged: bool,
    pub confirmed_by: Option<u64>,
}

/// The search itself, over `median(delay)` (capture and time in real use):
/// with `in_app`, the smallest geometric delay whose median is within the
/// threshold of it (else the closest); without, the smaller delay of the
/// first two successive geometric delays that agree, provided a much larger
/// delay agrees too (a false plateau goes on growing).
pub fn search_delay(
    last: u64,
    threshold: f64,
    in_app: Option<f64>,
    median: &mut dyn FnMut(u64) -> Result<f64>,
) -> Result<DelayChoice> {
    let mut seen: BTreeMap<u64, f64> = BTreeMap::new();
    let mut get = |k: u64, seen: &mut BTreeMap<u64, f64>| -> Result<f64> {
        if let Some(&m) = seen.get(&k) {
            return Ok(m);
        }
        let m = median(k)?;
        seen.insert(k, m);
        Ok(m)
    };
    let agree = |a: f64, b: f64| relative_difference(a, b) <= threshold;
    let delays = geometric_delays(last);
    for (i, &k) in delays.iter().enumerate() {
        let m = get(k, &mut seen)?;
        if let Some(t) = in_app {
            if agree(m, t) {
                return Ok(DelayChoice {
                    delay: k,
                    converged: true,
                    confirmed_by: None,
                });
            }
            continue;
        }
        let Some(&p) = i.checked_sub(1).and_then(|j| delays.get(j)) else {
            continue;
        };
        let mp = get(p, &mut seen)?;
        if !agree(m, mp) {
            continue;
        }
        let c = confirmation_delay(k, last);
        if c <= k {
            return Ok(DelayChoice {
                delay: p,
                converged: true,
                confirmed_by: None,
            });
        }
        if agree(get(c, &mut seen)?, mp) {
            return Ok(DelayChoice {
                delay: p,
                converged: true,
                confirmed_by: Some(c),
            });
        }
    }
    let delay = match in_app {
        Some(t) => seen
            .iter()
            .min_by(|a, b| relative_difference(*a.1, t).total_cmp(&relative_difference(*b.1, t)))
            .map(|(&k, _)| k)
            .unwrap_or(last),
        None => last,
    };
    Ok(DelayChoice {
        delay,
        converged: false,
        confirmed_by: None,
    })
}

/// A delay past --max-delay is tried only while each one brings the copy
/// this much nearer the application (its |ln ratio| shrinks by this factor
/// at least): a sub-microsecond call's cache state can need hundreds of
/// replayed calls, and a search that stopped at --max-delay while still
/// closing in would report a mismatch that more warm-up removes.
pub const STILL_CLOSING_IN: f64 = 0.8;

/// The search against the application, over `judge(delay)` (capture and
/// an interleaved comparison in real use): the first geometric delay whose
/// verdict is "matches"; past `last`, doubling up to `limit` (the call
/// before the timed one) while the ratio keeps closing in on 1
/// ([`STILL_CLOSING_IN`]); else the delay whose ratio is nearest 1 (a
/// delay without an estimate counts as farthest).
pub fn search_against_application(
    last: u64,
    limit: u64,
    judge: &mut dyn FnMut(u64) -> Result<(Verdict, Option<f64>)>,
) -> Result<DelayChoice> {
    let mut closest: Option<(u64, f64)> = None;
    let mut previous = f64::INFINITY;
    let mut k_next = None;
    let mut try_one = |k: u64,
                       closest: &mut Option<(u64, f64)>,
                       previous: &mut f64|
     -> Result<Option<(bool, f64)>> {
        let (verdict, ratio) = judge(k)?;
        if verdict == Verdict::Matches {
            return Ok(None);
        }
        let distance = ratio.map_or(f64::INFINITY, |r| r.ln().abs());
        if closest.is_none_or(|(_, d)| distance < d) {
            *closest = Some((k, distance));
        }
        let closing_in = distance.is_finite() && distance < STILL_CLOSING_IN * *previous;
        *previous = distance;
        Ok(Some((closing_in, distance)))
    };
    let matched = |k| DelayChoice {
        delay: k,
        converged: true,
        confirmed_by: None,
    };
    let mut closing_in = false;
    for k in geometric_delays(last) {
        match try_one(k, &mut closest, &mut previous)? {
            None => return Ok(matched(k)),
            Some((c, _)) => closing_in = c,
        }
        k_next = Some(k);
    }
    // Keep looking with more warm-up while it helps.
    let mut k = k_next.unwrap_or(last);
    while closing_in && k < limit {
        k = (k.max(1) * 2).min(limit);
        match try_one(k, &mut closest, &mut previous)? {
            None => return Ok(matched(k)),
            Some((c, _)) => closing_in = c,
        }
    }
    Ok(DelayChoice {
        delay: closest.map_or(last, |(k, _)| k),
        converged: false,
        confirmed_by: None,
    })
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
    if let DelayReference::Application(comparison) = &req.reference {
        let limit = req.capture.call.saturating_sub(1);
        return against_application(req, comparison, last, limit, criu);
    }
    let in_app_ns = in_app_median(req)?;
    against_delays(req, last, in_app_ns, criu)
}

/// With `--inapp-runs`: the call's median in that many plain runs.
fn in_app_median(req: &AutoDelayRequest) -> Result<Option<f64>> {
    let DelayReference::InAppMedian { runs } = req.reference else {
        return Ok(None);
    };
    if runs == 0 {
        return Err(CheckpointError::InvalidRequest(
            "--inapp-runs counts from 1".into(),
        ));
    }
    let r = measure_in_app(&InAppRequest {
        command: req.capture.command.clone(),
        site: req.capture.site.clone(),
        call: req.capture.call,
        runs,
        timeout: req.capture.timeout,
        preload: req.capture.preload.clone(),
    })?;
    Ok(Some(r.region_ns.median))
}

/// [`auto_delay`] against the next delays (or the in-app median): each
/// delay a trial image, timed; the chosen one captured into `-o`.
fn against_delays(
    req: &AutoDelayRequest,
    last: u64,
    in_app_ns: Option<f64>,
    criu: &Criu,
) -> Result<AutoDelayReport> {
    let final_image = req.capture.image.clone();
    // Trial images live in tdg's own private scratch, gone when the search
    // ends however it ends; only the chosen delay is captured into `-o`.
    let scratch = toolchain::scratch_dir("tdg-auto-delay")
        .map_err(crate::error::io_err("cannot create a scratch directory"))?;
    let trial = |k: u64| scratch.path().join(format!("delay{k}"));
    let mut measured: BTreeMap<u64, Summary> = BTreeMap::new();
    let searched = search_delay(last, req.threshold, in_app_ns, &mut |k| {
        let mut c = req.capture.clone();
        c.delay = k;
        c.image = trial(k);
        capture(&c, criu)?;
        let mut t = req.time.clone();
        t.samples = req.samples;
        t.criu = Some(criu.clone());
        let stats = time_image(&c.image, &t)?.region_ns;
        measured.insert(k, stats);
        Ok(stats.median)
    });
    let choice = searched?;
    let mut c = req.capture.clone();
    c.delay = choice.delay;
    capture(&c, criu)?;
    Ok(AutoDelayReport {
        rows: delay_rows(measured, in_app_ns),
        chosen: choice.delay,
        converged: choice.converged,
        confirmed_by: choice.confirmed_by,
        in_app_ns,
        threshold: req.threshold,
        against_application: false,
        image: final_image,
    })
}

/// One row a delay tried, in delay order: its median's change from the
/// previous delay's and its gap to the in-app median.
fn delay_rows(measured: BTreeMap<u64, Summary>, in_app_ns: Option<f64>) -> Vec<DelayRow> {
    let mut previous: Option<f64> = None;
    measured
        .into_iter()
        .map(|(delay, region_ns)| {
            let row = DelayRow {
                delay,
                change_from_previous: previous.map(|p| (region_ns.median - p) / p),
                gap_to_in_app: in_app_ns.map(|t| (region_ns.median - t) / t),
                region_ns,
                against_application: None,
            };
            previous = Some(region_ns.median);
            row
        })
        .collect()
}

/// [`auto_delay`] with the application as the reference: each delay is
/// captured straight into the final image directory (a capture empties an
/// earlier image of tdg's there) and compared with plain runs, interleaved,
/// so the image kept is the one that matched; only when none did is the
/// closest captured once more.
fn against_application(
    req: &AutoDelayRequest,
    comparison: &Comparison,
    last: u64,
    limit: u64,
    criu: &Criu,
) -> Result<AutoDelayReport> {
    comparison.check()?;
    let image = req.capture.image.clone();
    let mut rows: Vec<DelayRow> = Vec::new();
    let mut last_captured = None;
    let choice = search_against_application(last, limit, &mut |k| {
        let mut c = req.capture.clone();
        c.delay = k;
        capture(&c, criu)?;
        last_captured = Some(k);
        let mut time = req.time.clone();
        time.criu = Some(criu.clone());
        let report = validate(&ValidateRequest {
            image: image.clone(),
            // Run here, as the capture ran it (not in the image's directory).
            command: Some(req.capture.command.clone()),
            comparison: *comparison,
            app_timeout: req.capture.timeout,
            time,
        })?;
        let wall: Vec<f64> = report
            .rounds
            .iter()
            .flat_map(|r| match report.clock {
                crate::clock::ClockChoice::Cpu => &r.image_other_ns,
                _ => &r.image_ns,
            })
            .map(|&n| n as f64)
            .collect();
        let region_ns = Summary::of(&wall).unwrap_or(report.image_ns);
        let ratio = report.estimate.map(|e| e.ratio);
        rows.push(DelayRow {
            delay: k,
            region_ns,
            change_from_previous: rows
                .last()
                .map(|p| (region_ns.median - p.region_ns.median) / p.region_ns.median),
            gap_to_in_app: ratio.map(|r| r - 1.0),
            against_application: Some(DelayValidation {
                clock: report.clock,
                rounds: report.rounds.len(),
                image_median_ns: report.image_ns.median,
                in_app_median_ns: report.in_app_ns.median,
                estimate: report.estimate,
                verdict: report.verdict,
                fidelity: report.fidelity.clone(),
            }),
        });
        Ok((report.verdict, ratio))
    })?;
    if last_captured != Some(choice.delay) {
        let mut c = req.capture.clone();
        c.delay = choice.delay;
        capture(&c, criu)?;
    }
    Ok(AutoDelayReport {
        rows,
        chosen: choice.delay,
        converged: choice.converged,
        confirmed_by: None,
        in_app_ns: None,
        threshold: comparison.tolerance,
        against_application: true,
        image,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(table: &[(u64, f64)], last: u64, in_app: Option<f64>) -> (DelayChoice, Vec<u64>) {
        let mut asked = Vec::new();
        let mut median = |k: u64| {
            asked.push(k);
            // The table's value at the largest delay not above k.
            Ok(table.iter().rev().find(|(d, _)| *d <= k).unwrap().1)
        };
        let c = search_delay(last, 0.05, in_app, &mut median).unwrap();
        (c, asked)
    }

    #[test]
    fn delays_grow_geometrically() {
        assert_eq!(geometric_delays(1), [0, 1]);
        assert_eq!(geometric_delays(8), [0, 1, 2, 4, 8]);
        assert_eq!(geometric_delays(20), [0, 1, 2, 4, 8, 16, 20]);
        assert_eq!(confirmation_delay(2, 64), 10);
        assert_eq!(confirmation_delay(8, 20), 20);
    }

    /// The pointer chase: delays 1 and 2 agree (581, 591 ns) but the
    /// cache state keeps improving up to ~16 calls (290 ns). The confirmations
    /// at delays 10 and 16 disagree, so the search goes on to a real plateau.
    #[test]
    fn a_false_plateau_is_not_chosen() {
        let table = [
            (0, 14400.0),
            (1, 581.0),
            (2, 591.0),
            (8, 300.0),
            (16, 290.0),
        ];
        let (c, asked) = run(&table, 64, None);
        assert_eq!(c.delay, 8, "asked {asked:?}");
        assert!(c.converged);
        assert_eq!(c.confirmed_by, Some(64));
        assert!(
            asked.contains(&10),
            "the false plateau was checked: {asked:?}"
        );
    }

    #[test]
    fn a_real_plateau_is_confirmed_and_kept() {
        let (c, _) = run(&[(0, 4.0), (1, 1.3), (2, 1.02), (3, 1.0)], 64, None);
        assert_eq!((c.delay, c.confirmed_by), (2, Some(16)));
        // No room for a larger delay: chosen, unconfirmed.
        let (c, _) = run(&[(0, 1.0), (1, 1.01)], 1, None);
        assert_eq!((c.delay, c.converged, c.confirmed_by), (0, true, None));
        let (c, _) = run(&[(0, 4.0), (1, 3.0)], 1, None);
        assert_eq!((c.delay, c.converged), (1, false));
    }

    #[test]
    fn the_in_app_time_decides_when_known() {
        let table = [
            (0, 14400.0),
            (1, 581.0),
            (2, 591.0),
            (8, 300.0),
            (16, 260.0),
        ];
        let (c, _) = run(&table, 64, Some(250.0));
        assert_eq!((c.delay, c.converged), (16, true));
        // Never reached: the closest is kept and the search says so.
        let (c, _) = run(&table, 64, Some(100.0));
        assert_eq!((c.delay, c.converged), (16, false));
    }

    #[test]
    fn against_the_application_the_first_match_is_kept() {
        let verdicts = [
            (0, Verdict::Slower, Some(3.1)),
            (1, Verdict::Undecided, Some(1.12)),
            (2, Verdict::Matches, Some(1.01)),
            (4, Verdict::Matches, Some(1.0)),
        ];
        let mut asked = Vec::new();
        let c = search_against_application(64, 64, &mut |k| {
            asked.push(k);
            let (_, v, r) = verdicts.iter().find(|(d, ..)| *d == k).unwrap();
            Ok((*v, *r))
        })
        .unwrap();
        assert_eq!((c.delay, c.converged), (2, true));
        assert_eq!(asked, [0, 1, 2], "no delay after the first match");
        // None matches: the ratio nearest 1 either way, said unconverged.
        let c = search_against_application(4, 4, &mut |k| {
            Ok(match k {
                0 => (Verdict::Slower, Some(3.0)),
                1 => (Verdict::Undecided, Some(0.93)),
                2 => (Verdict::Undecided, Some(1.09)),
                _ => (Verdict::Undecided, None),
            })
        })
        .unwrap();
        assert_eq!((c.delay, c.converged), (1, false));
    }

    /// A short call whose copy is still closing in on the application at
    /// --max-delay: the search goes on doubling past it, up to the call
    /// before the timed one, and stops at the first match; one that stops
    /// closing in ends there.
    #[test]
    fn against_the_application_it_keeps_looking_while_the_copy_closes_in() {
        let ratio = |k: u64| 1.0 + 2.0 / (1.0 + k as f64).sqrt();
        let mut asked = Vec::new();
        let c = search_against_application(8, 1499, &mut |k| {
            asked.push(k);
            let r = ratio(k);
            let v = if r < 1.1 {
                Verdict::Matches
            } else {
                Verdict::Slower
            };
            Ok((v, Some(r)))
        })
        .unwrap();
        assert!(c.converged, "{asked:?}");
        assert_eq!(asked, [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
        assert_eq!(c.delay, 512);
        // Stuck at 1.3 from delay 4 on: no delay past 8 is tried.
        let mut asked = Vec::new();
        let c = search_against_application(8, 1499, &mut |k| {
            asked.push(k);
            Ok((Verdict::Slower, Some(if k < 4 { 3.0 } else { 1.3 })))
        })
        .unwrap();
        assert_eq!(asked, [0, 1, 2, 4, 8]);
        assert!(!c.converged);
        // Within the call: never past `limit`.
        let mut asked = Vec::new();
        search_against_application(8, 20, &mut |k| {
            asked.push(k);
            Ok((Verdict::Slower, Some(ratio(k))))
        })
        .unwrap();
        assert_eq!(asked.last(), Some(&20));
    }
}
