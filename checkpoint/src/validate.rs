//! `tdg checkpoint validate`: does an image reproduce the application? Plain
//! runs of the application (the call timed through the same markers or
//! region shim) and samples of the image alternate round by round, so a
//! slow minute of the shared host falls on both sides alike; each round's
//! image median over its in-app time is one ratio, and the rounds' ratios
//! give the verdict with a distribution-free confidence interval.
//!
//! A comparison that is not interleaved misleads on a shared host: timed
//! one after the other, the image and its application meet different
//! stretches of the host's speed, and an image that reproduces its
//! application reads far off it.

use crate::candidate::build_candidate;
use crate::candidate_run::CandidateRun;
use crate::capture::PRELOAD_DIR;
use crate::clock::{ClockChoice, CPU_CLOCK_FROM_NS};
use crate::error::{io_err, CheckpointError, Result};
use crate::fidelity::{CallState, Fidelity};
use crate::inapp::{measure_in_app_in, InAppRequest};
use crate::restore::{Candidate, CopyInstructions};
use crate::timing::{ImageTimer, TimeOptions, Verification};
use stats::{median_interval, Summary};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ValidateRequest {
    pub image: PathBuf,
    /// The application to run plainly; None: the captured command, in the
    /// directory it was captured from.
    pub command: Option<Vec<OsString>>,
    /// How the two sides are compared.
    pub comparison: Comparison,
    /// Limit for one plain run of the application.
    pub app_timeout: Option<Duration>,
    /// How the image is sampled (a candidate, the restore path, the limit).
    pub time: TimeOptions,
}

/// The rules of an interleaved comparison of an image with its
/// application (`checkpoint validate`, and `--auto-delay` against the
/// application at each delay).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Rounds before a verdict may stop the comparison.
    pub min_rounds: usize,
    /// Rounds after which an undecided comparison stops.
    pub max_rounds: usize,
    /// Plain runs of the application per round.
    pub runs_per_round: usize,
    /// Samples of the image per round (one restore, a fork each).
    pub samples_per_round: usize,
    /// The image matches when its time is within this fraction of the
    /// application's (both ways: 1/(1+t) .. 1+t).
    pub tolerance: f64,
    /// Confidence of the ratio's interval.
    pub confidence: f64,
    /// Which clock the ratio compares.
    pub clock: ClockChoice,
}

impl Default for Comparison {
    fn default() -> Self {
        Comparison {
            min_rounds: 6,
            max_rounds: 20,
            runs_per_round: 1,
            samples_per_round: 3,
            tolerance: 0.10,
            confidence: 0.95,
            clock: ClockChoice::Auto,
        }
    }
}

impl Comparison {
    /// One line on what is wrong with these rules, if anything.
    pub fn check(&self) -> Result<()> {
        if self.min_rounds == 0
            || self.max_rounds < self.min_rounds
            || self.runs_per_round == 0
            || self.samples_per_round == 0
        {
            return Err(CheckpointError::InvalidRequest(
                "--min-rounds, --runs and --samples count from 1, and --max-rounds is at least --min-rounds"
                    .into(),
            ));
        }
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(CheckpointError::InvalidRequest(
                "the tolerance (--within) is a fraction between 0 and 1 (e.g. 0.1 for 10%)".into(),
            ));
        }
        Ok(())
    }
}

impl Default for ValidateRequest {
    fn default() -> Self {
        ValidateRequest {
            image: PathBuf::new(),
            command: None,
            comparison: Comparison::default(),
            app_timeout: Some(Duration::from_secs(600)),
            time: TimeOptions::default(),
        }
    }
}

/// What the interval says about the image against the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The whole interval lies within the tolerance.
    Matches,
    /// The whole interval lies above 1 + tolerance.
    Slower,
    /// The whole interval lies below 1 / (1 + tolerance).
    Faster,
    /// Neither: more rounds, or a host that holds still, could decide.
    Undecided,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Slower => "slower",
            Verdict::Faster => "faster",
            Verdict::Undecided => "undecided",
        }
    }
}

/// The image's time over the application's with its interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RatioEstimate {
    /// The median of the rounds' ratios.
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// The interval's coverage (at least the confidence asked for).
    pub coverage: f64,
}

/// The image/in-app ratios `tolerance` takes as the same time: as far
/// below 1 as above it, in factors.
pub fn tolerance_band(tolerance: f64) -> (f64, f64) {
    (1.0 / (1.0 + tolerance), 1.0 + tolerance)
}

/// The verdict of `ratio`'s interval against `tolerance`; undecided without
/// an interval (too few rounds).
pub fn verdict(estimate: Option<&RatioEstimate>, tolerance: f64) -> Verdict {
    let Some(e) = estimate else {
        return Verdict::Undecided;
    };
    let (lo, hi) = tolerance_band(tolerance);
    if e.low >= lo && e.high <= hi {
        Verdict::Matches
    } else if e.low > hi {
        Verdict::Slower
    } else if e.high < lo {
        Verdict::Faster
    } else {
        Verdict::Undecided
    }
}

/// The ratio of the rounds and its interval (None: too few rounds).
pub fn ratio_estimate(ratios: &[f64], confidence: f64) -> Option<RatioEstimate> {
    let i = median_interval(ratios, confidence)?;
    Some(RatioEstimate {
        ratio: Summary::of(ratios)?.median,
        low: i.low,
        high: i.high,
        coverage: i.coverage,
    })
}

/// Calls shorter than this (wall time, the least reading of the first
/// round on either side: other work only adds to a call's time) are read
/// at least [`SHORT_CALL_RUNS`] plain runs and [`SHORT_CALL_SAMPLES`]
/// samples per round.
pub const SHORT_CALL_NS: f64 = 1000.0;
pub const SHORT_CALL_RUNS: usize = 5;
pub const SHORT_CALL_SAMPLES: usize = 15;

/// The largest round count [`rounds_to_decide`] looks at for the report.
pub const ROUNDS_PROJECTION_CAP: usize = 1000;

/// The rounds a comparison would need for a verdict if later rounds
/// scattered as `ratios` do: the smallest n, from `ratios.len()` up to
/// `cap`, at which the sign test's interval, read at the same ranks of the
/// rounds' distribution so far, lies wholly inside the tolerance or wholly
/// beyond it. None when no n up to `cap` does: the spread is too wide for
/// that many, or the rounds' median sits on the tolerance's edge, where no
/// number of rounds decides.
pub fn rounds_to_decide(
    ratios: &[f64],
    tolerance: f64,
    confidence: f64,
    cap: usize,
) -> Option<usize> {
    let mut sorted = ratios.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len();
    if m < 2 {
        return None;
    }
    let quantile = |p: f64| {
        let x = p * (m - 1) as f64;
        let i = (x.floor() as usize).min(m - 1);
        let f = x - i as f64;
        match sorted.get(i + 1) {
            Some(next) => sorted[i] * (1.0 - f) + next * f,
            None => sorted[i],
        }
    };
    let median = quantile(0.5);
    for n in m..=cap {
        // The interval's ranks at n rounds: those median_interval picks
        // from n ordered values.
        let ranks: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let Some(at) = median_interval(&ranks, confidence) else {
            continue;
        };
        let last = (n - 1) as f64;
        let projected = RatioEstimate {
            ratio: median,
            low: quantile(at.low / last),
            high: quantile(at.high / last),
            coverage: at.coverage,
        };
        if verdict(Some(&projected), tolerance) != Verdict::Undecided {
            return Some(n);
        }
    }
    None
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ValidationRound {
    /// The image was sampled before the application ran in this round.
    pub image_first: bool,
    /// The call's time in each plain run of the round (the compared clock).
    pub in_app_ns: Vec<u64>,
    /// The region's time in each sample of the image in the round.
    pub image_ns: Vec<u64>,
    /// The image's median over the application's median, this round.
    pub ratio: f64,
    /// The other clock's figures, for the record.
    pub in_app_other_ns: Vec<u64>,
    pub image_other_ns: Vec<u64>,
    /// The state each call ran in, both sides (empty: an older host library).
    #[serde(default)]
    pub in_app_states: Vec<CallState>,
    #[serde(default)]
    pub image_states: Vec<CallState>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ValidationReport {
    pub image: PathBuf,
    pub site: Option<String>,
    pub call: Option<u64>,
    pub delay: Option<u64>,
    /// The candidate the image's samples ran (None: the application's code).
    pub candidate: Option<PathBuf>,
    /// The application as it was run, and where.
    pub command: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// The region shim the plain runs preloaded (a shim capture).
    pub shim: Option<PathBuf>,
    /// "wall" or "cpu": the clock the rounds' figures and the ratio use.
    pub clock: ClockChoice,
    pub rounds: Vec<ValidationRound>,
    #[serde(with = "crate::summary_json")]
    pub in_app_ns: Summary,
    #[serde(with = "crate::summary_json")]
    pub image_ns: Summary,
    pub estimate: Option<RatioEstimate>,
    pub confidence: f64,
    pub tolerance: f64,
    pub verdict: Verdict,
    /// The verdict came before the last round allowed.
    pub decided_early: bool,
    /// Undecided: the rounds that would decide if later ones scattered as
    /// these did ([`rounds_to_decide`], up to [`ROUNDS_PROJECTION_CAP`]);
    /// None when decided, or when no count up to the cap would.
    #[serde(default)]
    pub rounds_to_decide: Option<usize>,
    /// Undecided before --max-rounds: the spread so far said that even
    /// --max-rounds rounds would not decide, so the rest were not run.
    #[serde(default)]
    pub stopped_hopeless: bool,
    /// Everything, both sides, from the first round to the last.
    pub wall_s: f64,
    /// The state around the call on both sides over every round, and what
    /// differs (None: an older host library on either side).
    #[serde(default)]
    pub fidelity: Option<Fidelity>,
    /// How widely each side's figures spread over every round.
    #[serde(default)]
    pub spread: Option<Spread>,
}

/// How widely each side's figures spread over every round: half the
/// interquartile range over the median. A side spreading wider than the
/// tolerance keeps a comparison of a few dozen rounds undecided however
/// faithful the copy is: the call is too short to time that steadily
/// there, and the verdict names that side.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    pub in_app: f64,
    pub image: f64,
}

/// Half the interquartile range over the median (None: fewer than four
/// figures, or a zero median).
fn relative_spread(values: impl Iterator<Item = u64>) -> Option<f64> {
    let mut v: Vec<f64> = values.map(|n| n as f64).collect();
    if v.len() < 4 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let median = at(0.5);
    (median > 0.0).then(|| (at(0.75) - at(0.25)) / 2.0 / median)
}

impl Spread {
    pub fn of(rounds: &[ValidationRound]) -> Option<Spread> {
        let side = |f: &dyn Fn(&ValidationRound) -> &Vec<u64>| {
            relative_spread(rounds.iter().flat_map(f).copied())
        };
        Some(Spread {
            in_app: side(&|r| &r.in_app_ns)?,
            image: side(&|r| &r.image_ns)?,
        })
    }

    /// The line an undecided verdict gets: both spreads, and the side (if
    /// any) whose spread alone is wider than the tolerance.
    pub fn sentence(&self, tolerance: f64) -> String {
        let pct = |f: f64| format!("{:.0}%", f * 100.0);
        let cause = match (self.in_app > tolerance, self.image > tolerance) {
            (true, true) => format!(
                ": both wider than the {} tolerance, the call is too short to time this steadily on this host now (compare on a quieter host, or a longer region)",
                pct(tolerance)
            ),
            (true, false) => format!(
                ": the application's own calls spread wider than the {} tolerance from run to run, so no copy can be shown to match them here (a quieter host, or a longer region)",
                pct(tolerance)
            ),
            (false, true) => format!(
                ": the copy's samples spread wider than the {} tolerance, the application's calls do not",
                pct(tolerance)
            ),
            (false, false) => String::new(),
        };
        format!(
            "spread  the application's calls +-{} around their median, the copy's samples +-{} (half the interquartile range){cause}\n",
            pct(self.in_app),
            pct(self.image)
        )
    }
}

impl ValidationReport {
    pub fn render_text(&self) -> String {
        let mut t = self.render_setup();
        t += &self.render_rounds();
        t += &format!(
            "\nin-app  {}\nimage   {}\n",
            self.in_app_ns.ns_line(),
            self.image_ns.ns_line()
        );
        t += &self.render_verdict();
        // Undecided, or told apart while a side spreads wider than the
        // tolerance (a loaded host slows the application's single calls
        // more than the copy's many samples): the spreads say so.
        if let Some(s) = &self.spread {
            let wide = s.in_app > self.tolerance || s.image > self.tolerance;
            if self.verdict == Verdict::Undecided || (self.verdict != Verdict::Matches && wide) {
                t += &s.sentence(self.tolerance);
            }
        }
        if let Some(f) = &self.fidelity {
            t += "\n";
            t += &f.render_table();
            if self.verdict != Verdict::Matches {
                t += &f.render_causes();
            }
        }
        t
    }

    /// What was compared, how, and with which clock.
    fn render_setup(&self) -> String {
        let what = match (&self.site, self.call, self.delay) {
            (Some(s), Some(c), Some(0)) => format!("region {s}, call {c}, immediate checkpoint"),
            (Some(s), Some(c), Some(d)) => format!("region {s}, call {c}, delayed by {d} call(s)"),
            _ => "the marked region".to_string(),
        };
        let mut t = format!("image {} ({what})\n", self.image.display());
        if let Some(c) = &self.candidate {
            t += &format!("image samples ran candidate {}\n", c.display());
        }
        t += &format!(
            "application {}{}{}\n",
            self.command.join(" "),
            self.cwd
                .as_ref()
                .map(|d| format!(" (in {})", d.display()))
                .unwrap_or_default(),
            self.shim
                .as_ref()
                .map(|s| format!(", through the image's shim {}", s.display()))
                .unwrap_or_default()
        );
        t += &format!(
            "{} rounds, alternating which side goes first: {} plain run(s) and {} image sample(s) each; {:.1} s\n",
            self.rounds.len(),
            self.rounds.last().map_or(0, |r| r.in_app_ns.len()),
            self.rounds.last().map_or(0, |r| r.image_ns.len()),
            self.wall_s
        );
        t += match self.clock {
            ClockChoice::Cpu => "clock   the call's CPU time (robust to the host's other tenants; --clock wall for wall time)\n\n",
            _ => "clock   the call's wall time (TSC)\n\n",
        };
        t
    }

    /// One line a round: who went first, both medians, the ratio.
    fn render_rounds(&self) -> String {
        let mut t = "round  first   in-app median   image median   image/in-app\n".to_string();
        for (i, r) in self.rounds.iter().enumerate() {
            t += &format!(
                "{:>5}  {:<6}  {:>14}  {:>13}  {:>12.3}\n",
                i + 1,
                if r.image_first { "image" } else { "app" },
                stats::ns(median_of(&r.in_app_ns)),
                stats::ns(median_of(&r.image_ns)),
                r.ratio
            );
        }
        t
    }

    /// The ratio's line and the verdict's, with what an undecided one needs.
    fn render_verdict(&self) -> String {
        let Some(e) = &self.estimate else {
            return format!(
                "verdict undecided: {} rounds are too few for a {:.0}% interval (6 at least); raise --min-rounds\n",
                self.rounds.len(),
                self.confidence * 100.0
            );
        };
        let tol = self.tolerance * 100.0;
        let reason = match self.verdict {
            Verdict::Matches => format!(
                "the image reproduces the application within {tol:.0}% (the whole interval is inside it)"
            ),
            Verdict::Slower => format!(
                "the image runs the call slower than the application, by more than {tol:.0}% over the whole interval"
            ),
            Verdict::Faster => format!(
                "the image runs the call faster than the application, by more than {tol:.0}% over the whole interval"
            ),
            Verdict::Undecided => format!(
                "the interval straddles the {tol:.0}% tolerance after {} rounds{}; {}",
                self.rounds.len(),
                if self.stopped_hopeless {
                    " (stopped before --max-rounds: at this spread it would not decide either)"
                } else {
                    ""
                },
                self.rounds_needed_advice()
            ),
        };
        format!(
            "ratio   image/in-app {:.3} (median of the rounds), {:.0}% interval {:.3}-{:.3}\nverdict {}: {reason}\n",
            e.ratio,
            e.coverage * 100.0,
            e.low,
            e.high,
            self.verdict.word(),
        )
    }

    /// What would decide an undecided comparison.
    fn rounds_needed_advice(&self) -> String {
        match self.rounds_to_decide {
            Some(n) => format!(
                "at the spread of these rounds about {n} would decide (--max-rounds {n}), or compare on a quieter host"
            ),
            None => format!(
                "at this spread not even {ROUNDS_PROJECTION_CAP} rounds would (the median ratio sits near the tolerance's edge, or the host is too noisy): compare on a quieter host"
            ),
        }
    }
}

/// The region shim a shim capture keeps in its image (None: a marked
/// application).
pub fn image_shim(image: &Path) -> Result<Option<PathBuf>> {
    let dir = image.join(PRELOAD_DIR);
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut found = Vec::new();
    for entry in
        std::fs::read_dir(&dir).map_err(io_err(format!("cannot list {}", dir.display())))?
    {
        let entry = entry.map_err(io_err(format!("cannot list {}", dir.display())))?;
        if entry.file_name().to_string_lossy().ends_with(".so") {
            found.push(entry.path());
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        n => Err(CheckpointError::BadImage {
            path: image.to_path_buf(),
            reason: format!(
                "{} holds {n} shims where a capture keeps one; recapture it",
                dir.display()
            ),
        }),
    }
}

/// The mean of the middle half (from the first quartile to the third): a
/// call of ~100 ns reads in the timer's 10 ns steps, so a median of such
/// calls moves only in 10 % steps and two sides that differ by less never
/// read "within 10 %"; the middle half's mean resolves below a step (the
/// calls' own spread dithers it) and, like the median, ignores the tails an
/// interrupt leaves.
pub fn interquartile_mean(v: &[u64]) -> f64 {
    let mut s: Vec<u64> = v.to_vec();
    s.sort_unstable();
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    let (lo, hi) = (n / 4, n - n / 4);
    let mid = &s[lo..hi.max(lo + 1)];
    mid.iter().map(|&x| x as f64).sum::<f64>() / mid.len() as f64
}

fn median_of(v: &[u64]) -> f64 {
    Summary::of(&v.iter().map(|&n| n as f64).collect::<Vec<_>>()).map_or(f64::NAN, |s| s.median)
}

/// What one side gave in a round: each call's wall time, CPU time and the
/// state it ran in.
struct SideFigures {
    wall_ns: Vec<u64>,
    cpu_ns: Vec<u64>,
    states: Vec<CallState>,
}

/// The two sides of a comparison, ready to be run round by round: the
/// image's samples (a restore, a fork each) and the application's plain
/// runs.
struct Sides<'a> {
    timer: &'a ImageTimer,
    candidates: Vec<Candidate>,
    /// The implementation each of a round's samples runs.
    schedule: Vec<usize>,
    restore_per_sample: bool,
    in_app: InAppRequest,
    /// Where the plain runs run (None: here).
    cwd: Option<PathBuf>,
}

impl Sides<'_> {
    /// The two sides of `req` on `timer`'s image, checked before any round:
    /// the captured command (in its directory) unless `req` names one.
    fn of<'a>(req: &ValidateRequest, timer: &'a ImageTimer) -> Result<Sides<'a>> {
        let manifest = &timer.manifest;
        let Some(call) = manifest.call else {
            return Err(CheckpointError::InvalidRequest(format!(
                "{} was captured with tdg_enter_checkpoint/tdg_stop_checkpoint, which plain runs do not time; \
                 validate images captured at a marked site or through a spec's shim",
                req.image.display()
            )));
        };
        let shim = image_shim(&timer.image)?;
        let (command, cwd): (Vec<OsString>, Option<PathBuf>) = match &req.command {
            Some(c) if !c.is_empty() => (c.clone(), None),
            _ => (
                manifest.command.iter().map(OsString::from).collect(),
                Some(manifest.cwd.clone()),
            ),
        };
        let in_app = InAppRequest {
            command,
            site: manifest.site.clone(),
            call,
            runs: req.comparison.runs_per_round,
            timeout: req.app_timeout,
            preload: shim,
        };
        let candidates: Vec<Candidate> = req.time.candidate.iter().cloned().collect();
        timer.check(&CopyInstructions {
            candidate: req.time.candidate.clone(),
            outputs: None,
        })?;
        Ok(Sides {
            timer,
            schedule: vec![candidates.len(); req.comparison.samples_per_round],
            candidates,
            restore_per_sample: req.time.restore_per_sample,
            in_app,
            cwd,
        })
    }

    fn sample_image(&self) -> Result<SideFigures> {
        let mut taken =
            self.timer
                .take_samples(&self.candidates, &self.schedule, self.restore_per_sample)?;
        if let Some((_, e)) = taken.failures.pop() {
            return Err(e);
        }
        let runs: Vec<_> = taken.runs.iter().flatten().collect();
        Ok(SideFigures {
            wall_ns: runs.iter().map(|r| r.region_ns).collect(),
            cpu_ns: runs.iter().map(|r| r.region_cpu_ns).collect(),
            states: runs.iter().filter_map(|r| r.state).collect(),
        })
    }

    fn run_app(&self) -> Result<SideFigures> {
        let r = measure_in_app_in(&self.in_app, self.cwd.as_deref())?;
        Ok(SideFigures {
            wall_ns: r.samples_ns,
            cpu_ns: r.samples_cpu_ns,
            states: r.states,
        })
    }

    /// Both sides of one round, the image first or last.
    fn run_round(&self, image_first: bool) -> Result<(SideFigures, SideFigures)> {
        if image_first {
            let image = self.sample_image()?;
            Ok((self.run_app()?, image))
        } else {
            let app = self.run_app()?;
            Ok((app, self.sample_image()?))
        }
    }

    /// A sub-microsecond call read once scatters by 2x (an interrupt, the
    /// timer's 10 ns steps), so one plain run against three samples gives
    /// rounds too noisy to decide: from the second round on such a call is
    /// read at least SHORT_CALL_RUNS times a side per round.
    fn read_short_call_more(&mut self) {
        self.in_app.runs = self.in_app.runs.max(SHORT_CALL_RUNS);
        let len = self.schedule.len().max(SHORT_CALL_SAMPLES);
        self.schedule.resize(len, self.candidates.len());
    }
}

/// How the rounds read their figures, settled by the first round: the
/// clock compared, and whether the call is short enough to be centred by
/// its middle half.
struct Reading {
    clock: ClockChoice,
    short_call: bool,
}

impl Reading {
    /// What the first round decides: the clock (when told `Auto`, by the
    /// plain runs' median) and whether the call is short (by the least
    /// reading of either side: a round may hold one plain run, and other
    /// work only adds to a call's time).
    fn settled(
        clock: ClockChoice,
        first_app_wall_ns: &[u64],
        first_image_wall_ns: &[u64],
    ) -> Reading {
        let median = median_of(first_app_wall_ns);
        let least = first_app_wall_ns
            .iter()
            .chain(first_image_wall_ns)
            .min()
            .map_or(median, |&ns| ns as f64);
        Reading {
            clock: match clock {
                ClockChoice::Auto if median >= CPU_CLOCK_FROM_NS => ClockChoice::Cpu,
                ClockChoice::Auto => ClockChoice::Wall,
                told => told,
            },
            short_call: least < SHORT_CALL_NS,
        }
    }

    fn center(&self, v: &[u64]) -> f64 {
        if self.short_call {
            interquartile_mean(v)
        } else {
            median_of(v)
        }
    }

    /// One round's record: the compared clock's figures first, their ratio.
    fn round(&self, image_first: bool, app: SideFigures, image: SideFigures) -> ValidationRound {
        let ((in_app_ns, in_app_other_ns), (image_ns, image_other_ns)) =
            if self.clock == ClockChoice::Cpu {
                ((app.cpu_ns, app.wall_ns), (image.cpu_ns, image.wall_ns))
            } else {
                ((app.wall_ns, app.cpu_ns), (image.wall_ns, image.cpu_ns))
            };
        let a = self.center(&in_app_ns);
        let ratio = if a > 0.0 {
            self.center(&image_ns) / a
        } else {
            f64::INFINITY
        };
        ValidationRound {
            image_first,
            in_app_ns,
            image_ns,
            ratio,
            in_app_other_ns,
            image_other_ns,
            in_app_states: app.states,
            image_states: image.states,
        }
    }
}

/// What the rounds came to.
struct RoundsOutcome {
    rounds: Vec<ValidationRound>,
    clock: ClockChoice,
    estimate: Option<RatioEstimate>,
    verdict: Verdict,
    stopped_hopeless: bool,
}

/// After `rounds` (at least `min_rounds`): the estimate and verdict so far,
/// and whether to stop (decided, or hopeless before `max_rounds`).
fn judge(cmp: &Comparison, rounds: &[ValidationRound]) -> (Option<RatioEstimate>, Verdict, Stop) {
    let ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
    let estimate = ratio_estimate(&ratios, cmp.confidence);
    let decided = verdict(estimate.as_ref(), cmp.tolerance);
    if decided != Verdict::Undecided {
        return (estimate, decided, Stop::Decided);
    }
    // Rounds are spent only where they can decide: once twice the minimum
    // are in (enough to judge the spread), stop when even the last round
    // allowed would leave the verdict open.
    let hopeless = rounds.len() >= 2 * cmp.min_rounds
        && rounds.len() < cmp.max_rounds
        && rounds_to_decide(&ratios, cmp.tolerance, cmp.confidence, cmp.max_rounds).is_none();
    let stop = if hopeless { Stop::Hopeless } else { Stop::GoOn };
    (estimate, decided, stop)
}

#[derive(PartialEq)]
enum Stop {
    GoOn,
    Decided,
    Hopeless,
}

/// Rounds until the ratio is decided (after `min_rounds`), hopeless, or
/// `max_rounds` are done.
fn run_rounds(sides: &mut Sides, cmp: &Comparison) -> Result<RoundsOutcome> {
    let mut reading = Reading {
        clock: cmp.clock,
        short_call: false,
    };
    let mut out = RoundsOutcome {
        rounds: Vec::new(),
        clock: cmp.clock,
        estimate: None,
        verdict: Verdict::Undecided,
        stopped_hopeless: false,
    };
    while out.rounds.len() < cmp.max_rounds {
        let image_first = out.rounds.len() % 2 == 1;
        let (app, image) = sides.run_round(image_first)?;
        if out.rounds.is_empty() {
            reading = Reading::settled(cmp.clock, &app.wall_ns, &image.wall_ns);
            if reading.short_call {
                sides.read_short_call_more();
            }
        }
        let round = reading.round(image_first, app, image);
        tracing::info!(
            round = out.rounds.len() + 1,
            ratio = round.ratio,
            "validate"
        );
        out.rounds.push(round);
        if out.rounds.len() >= cmp.min_rounds {
            let (estimate, verdict, stop) = judge(cmp, &out.rounds);
            (out.estimate, out.verdict) = (estimate, verdict);
            out.stopped_hopeless = stop == Stop::Hopeless;
            if stop != Stop::GoOn {
                break;
            }
        }
    }
    out.clock = reading.clock;
    Ok(out)
}

/// Alternate plain runs of the application and samples of the image, round
/// by round, until the rounds' ratio is decided (after `min_rounds`) or
/// `max_rounds` are done.
pub fn validate(req: &ValidateRequest) -> Result<ValidationReport> {
    let cmp = &req.comparison;
    cmp.check()?;
    let timer = ImageTimer::open(&req.image, &req.time)?;
    let mut sides = Sides::of(req, &timer)?;
    let started = Instant::now();
    let out = run_rounds(&mut sides, cmp)?;
    Ok(report(req, &timer, sides, out, started))
}

/// The report of a comparison's rounds.
fn report(
    req: &ValidateRequest,
    timer: &ImageTimer,
    sides: Sides,
    out: RoundsOutcome,
    started: Instant,
) -> ValidationReport {
    let cmp = &req.comparison;
    let manifest = &timer.manifest;
    let rounds = out.rounds;
    let ratios: Vec<f64> = rounds.iter().map(|r| r.ratio).collect();
    let rounds_needed = (out.verdict == Verdict::Undecided)
        .then(|| {
            rounds_to_decide(
                &ratios,
                cmp.tolerance,
                cmp.confidence,
                ROUNDS_PROJECTION_CAP,
            )
        })
        .flatten();
    let states = |f: &dyn Fn(&ValidationRound) -> &Vec<CallState>| -> Vec<CallState> {
        rounds.iter().flat_map(f).copied().collect()
    };
    let fidelity = crate::fidelity::compare(
        &states(&|r| &r.in_app_states),
        &states(&|r| &r.image_states),
        &discarded_outputs(manifest),
    );
    let all = |f: &dyn Fn(&ValidationRound) -> &Vec<u64>| -> Summary {
        let v: Vec<f64> = rounds.iter().flat_map(f).map(|&n| n as f64).collect();
        Summary::of(&v).expect("at least one round")
    };
    ValidationReport {
        image: timer.image.clone(),
        site: manifest.site.clone(),
        call: manifest.call,
        delay: manifest.delay,
        candidate: req.time.candidate.as_ref().map(|c| c.source.clone()),
        command: sides
            .in_app
            .command
            .iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect(),
        cwd: sides.cwd,
        shim: sides.in_app.preload,
        clock: out.clock,
        in_app_ns: all(&|r| &r.in_app_ns),
        image_ns: all(&|r| &r.image_ns),
        decided_early: out.verdict != Verdict::Undecided && rounds.len() < cmp.max_rounds,
        rounds_to_decide: rounds_needed,
        stopped_hopeless: out.stopped_hopeless,
        spread: Spread::of(&rounds),
        rounds,
        estimate: out.estimate,
        confidence: cmp.confidence,
        tolerance: cmp.tolerance,
        verdict: out.verdict,
        wall_s: started.elapsed().as_secs_f64(),
        fidelity,
    }
}

/// The files the application writes that its copies of `manifest`'s image
/// write elsewhere than beside the application's ([`crate::capture_info::discarded_outputs`]).
pub fn discarded_outputs(manifest: &crate::manifest::Manifest) -> Vec<String> {
    crate::capture_info::discarded_outputs(&manifest.capture)
}

/// How validating an image with (or without) a candidate ended.
// One value per command, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum ValidationOutcome {
    Validated(ValidationReport),
    /// The candidate's outputs differ from the original's on the image: not
    /// compared.
    Differs(Verification),
}

/// [`validate`] with the image's samples running `candidate` (None: the
/// application's code): built first and, unless told not to, checked
/// against the original on the image, so a wrong candidate is not timed.
pub fn validate_candidate(
    req: &ValidateRequest,
    candidate: Option<&CandidateRun>,
) -> Result<ValidationOutcome> {
    let Some(c) = candidate else {
        return validate(req).map(ValidationOutcome::Validated);
    };
    let scratch = toolchain::scratch_dir("tdg-candidate")
        .map_err(io_err("cannot make a scratch directory for the candidate"))?;
    let so = build_candidate(&c.source, scratch.path(), "candidate")?;
    let mut req = req.clone();
    if c.verify {
        let v = ImageTimer::open(&req.image, &req.time)?.verify(&so, c.tolerance)?;
        if v.mismatch.is_some() {
            return Ok(ValidationOutcome::Differs(v));
        }
        // Just checked: the image and its binary are what they were.
        req.time.verify = false;
    }
    req.time.candidate = Some(so);
    validate(&req).map(ValidationOutcome::Validated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(in_app: &[u64], image: &[u64]) -> ValidationRound {
        ValidationRound {
            image_first: false,
            in_app_ns: in_app.to_vec(),
            image_ns: image.to_vec(),
            ratio: 1.0,
            in_app_other_ns: Vec::new(),
            image_other_ns: Vec::new(),
            in_app_states: Vec::new(),
            image_states: Vec::new(),
        }
    }

    #[test]
    fn the_side_whose_spread_exceeds_the_tolerance_is_named() {
        // An application call reading 110 or 210 ns from run to run, a
        // copy steady at 200 ns.
        let rounds: Vec<ValidationRound> = [110, 210, 200, 120, 215, 205, 110, 200]
            .iter()
            .map(|&a| round(&[a], &[200, 202, 198]))
            .collect();
        let s = Spread::of(&rounds).unwrap();
        assert!(s.in_app > 0.2 && s.image <= 0.01, "{s:?}");
        let line = s.sentence(0.10);
        assert!(
            line.contains("the application's own calls spread wider than the 10% tolerance"),
            "{line}"
        );
        // Both steady: the spreads are given, no side is blamed.
        let steady: Vec<ValidationRound> =
            (0..8).map(|_| round(&[200, 201], &[199, 202])).collect();
        let line = Spread::of(&steady).unwrap().sentence(0.10);
        assert!(!line.contains("wider"), "{line}");
        assert!(Spread::of(&steady[..1]).is_none(), "too few figures");
    }

    fn est(low: f64, high: f64) -> RatioEstimate {
        RatioEstimate {
            ratio: (low + high) / 2.0,
            low,
            high,
            coverage: 0.95,
        }
    }

    #[test]
    fn the_verdict_is_the_intervals_place_against_the_tolerance() {
        assert_eq!(verdict(Some(&est(0.95, 1.08)), 0.10), Verdict::Matches);
        assert_eq!(verdict(Some(&est(1.12, 1.40)), 0.10), Verdict::Slower);
        assert_eq!(verdict(Some(&est(0.5, 0.88)), 0.10), Verdict::Faster);
        // Surely slower, but perhaps by less than the tolerance.
        assert_eq!(verdict(Some(&est(1.02, 1.15)), 0.10), Verdict::Undecided);
        assert_eq!(verdict(Some(&est(0.85, 1.2)), 0.10), Verdict::Undecided);
        assert_eq!(verdict(None, 0.10), Verdict::Undecided);
    }

    #[test]
    fn the_middle_half_resolves_below_the_timers_step_and_ignores_the_tails() {
        // 100 and 110 ns calls, 10 ns steps: both medians read 100 or 110.
        let a = [90, 100, 100, 100, 100, 110, 110, 5000];
        let b = [100, 100, 100, 110, 110, 110, 110, 4000];
        let (ma, mb) = (interquartile_mean(&a), interquartile_mean(&b));
        assert!(
            (ma - 102.5).abs() < 1e-9 && (mb - 107.5).abs() < 1e-9,
            "{ma} {mb}"
        );
        assert_eq!(interquartile_mean(&[7]), 7.0);
        assert!(interquartile_mean(&[]).is_nan());
    }

    #[test]
    fn a_call_is_short_when_either_sides_least_first_reading_is() {
        // bzip2's ~100 ns call: its one plain run read 1.012 us, the
        // image's samples 220-712 ns.
        let r = Reading::settled(ClockChoice::Auto, &[1012], &[351, 220, 712]);
        assert!(r.short_call);
        assert_eq!(r.clock, ClockChoice::Wall);
        let long = Reading::settled(ClockChoice::Auto, &[1500, 1800], &[1200, 1300]);
        assert!(!long.short_call);
        // The clock still follows the plain runs' median.
        let cpu = Reading::settled(ClockChoice::Auto, &[3_000_000], &[900]);
        assert_eq!((cpu.clock, cpu.short_call), (ClockChoice::Cpu, true));
    }

    #[test]
    fn rounds_give_a_ratio_only_from_six_on() {
        let r = [1.0, 1.02, 0.98, 1.01, 0.99];
        assert!(ratio_estimate(&r, 0.95).is_none());
        let e = ratio_estimate(&[1.0, 1.02, 0.98, 1.01, 0.99, 1.03], 0.95).unwrap();
        assert_eq!((e.low, e.high), (0.98, 1.03));
        assert!((e.ratio - 1.005).abs() < 1e-12);
    }

    #[test]
    fn the_rounds_to_decide_follow_the_spread() {
        // Six ratios in 0.85-1.05: the interval is their whole range, but
        // the middle ones sit well inside 10%; more rounds narrow it there.
        let wide = [0.85, 0.97, 0.99, 1.0, 1.02, 1.05];
        assert_eq!(
            verdict(ratio_estimate(&wide, 0.95).as_ref(), 0.10),
            Verdict::Undecided
        );
        let n = rounds_to_decide(&wide, 0.10, 0.95, 1000).expect("decidable");
        assert!(n > 6 && n <= 40, "{n}");
        // Already decided: the rounds so far suffice.
        let tight = [0.98, 0.99, 1.0, 1.0, 1.01, 1.02];
        assert_eq!(rounds_to_decide(&tight, 0.10, 0.95, 1000), Some(6));
        // Spread twice as wide around the same median: more rounds.
        let wider = [0.70, 0.94, 0.98, 1.0, 1.04, 1.10, 1.30];
        let m = rounds_to_decide(&wider, 0.10, 0.95, 1000).expect("decidable");
        assert!(m > n, "{m} vs {n}");
        // A median on the tolerance's edge: no count decides.
        let edge = [1.0, 1.05, 1.08, 1.1, 1.12, 1.15, 1.2];
        assert_eq!(rounds_to_decide(&edge, 0.10, 0.95, 1000), None);
        // Within a cap that is too small: none.
        assert_eq!(rounds_to_decide(&wider, 0.10, 0.95, m - 1), None);
    }
}
