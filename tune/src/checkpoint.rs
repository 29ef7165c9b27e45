//! A CRIU checkpoint of the application as the search objective: every
//! configuration is built as a candidate shared object, verified against the
//! application's own code on the image, and timed in restored copies
//! (seed 003, section 3.2, used for tuning rather than only measuring).

use crate::measurement::Measurement;
use crate::search::Objective;
use crate::TuneError;
use checkpoint::{Candidate, CandidateSource, ImageTimer};
use config::Config;

/// Times each configuration on the image: the median region wall time of
/// `samples` restored copies. Its first round also samples the
/// application's own code, to say once whether the copies run the call in
/// the captured application's state ([`CheckpointObjective::unfaithful`]).
pub struct CheckpointObjective {
    pub timer: ImageTimer,
    /// The candidate without the tuned macros (flags, --extra, fixed -D).
    pub base: CandidateSource,
    pub samples: usize,
    /// Compare each configuration's outputs with the original's first.
    pub verify: bool,
    pub tolerance: f64,
    /// Why the copies do not run the call in the captured application's
    /// state, and by how much (one line, warned once), from the first round
    /// the application's own code was sampled in; None: the same state, or
    /// not judged (yet).
    pub unfaithful: Option<String>,
    state_judged: bool,
    scratch: toolchain::ScratchDir,
    built: usize,
    /// Every candidate built and verified so far, by its source: a
    /// re-timing's rounds sample the same configurations again, and
    /// building and verifying one again (a compile and a restore) would
    /// tell nothing new.
    prepared: Vec<(CandidateSource, Candidate)>,
}

impl CheckpointObjective {
    pub fn new(
        timer: ImageTimer,
        base: CandidateSource,
        samples: usize,
        verify: bool,
        tolerance: f64,
    ) -> Result<Self, TuneError> {
        let scratch = toolchain::scratch_dir("tdg-tune-candidates")
            .map_err(|e| TuneError::Objective(format!("cannot create a scratch directory: {e}")))?;
        Ok(CheckpointObjective {
            timer,
            base,
            samples: samples.max(1),
            verify,
            tolerance,
            unfaithful: None,
            state_judged: false,
            scratch,
            built: 0,
            prepared: Vec::new(),
        })
    }

    /// Whether this round samples the application's own code beside the
    /// candidates, to judge the copies' state once: the first round with a
    /// candidate, on an image that recorded the captured call's state.
    fn judges_state(&self, candidates: usize) -> bool {
        !self.state_judged
            && candidates > 0
            && self
                .timer
                .manifest
                .captured_call
                .is_some_and(|c| c.state.is_some())
    }

    /// The state `copies` (samples of the application's own code) ran the
    /// call in against the captured application's run of it, as `tdg
    /// checkpoint time` compares them: each effect that differs with both
    /// sides' figures, as one line; None when none differs.
    fn unfaithful_line(&self, copies: &[&checkpoint::RestoredRun]) -> Option<String> {
        let captured = self.timer.manifest.captured_call?;
        let states: Vec<_> = copies.iter().filter_map(|r| r.state).collect();
        let fidelity = checkpoint::fidelity::compare(
            &[captured.state?],
            &states,
            &checkpoint::validate::discarded_outputs(&self.timer.manifest),
        )?;
        if fidelity.findings.is_empty() {
            return None;
        }
        let causes: Vec<String> = fidelity
            .findings
            .iter()
            .map(|f| format!("{}: {}", f.effect.name(), f.text))
            .collect();
        let ns: Vec<u64> = copies.iter().map(|r| r.region_ns).collect();
        let cpu: Vec<u64> = copies.iter().map(|r| r.region_cpu_ns).collect();
        let ratio = checkpoint::timing::CapturedCallCheck::of(captured, &ns, &cpu)
            .map(|c| {
                format!(
                    " (the copies' median {:.2}x the captured call's time)",
                    c.median_ratio
                )
            })
            .unwrap_or_default();
        let image = self.timer.image.display();
        Some(format!(
            "the restored copies of {image} run the call in another state than the captured application{ratio}: {}; \
             candidates are ranked in the copies' state (`tdg checkpoint validate {image} -- COMMAND` compares \
             them with the application side by side)",
            causes.join("; ")
        ))
    }

    /// How many candidates were built (and verified): one per
    /// configuration, however many rounds sampled it.
    pub fn built(&self) -> usize {
        self.built
    }

    /// Build (and verify) one configuration's candidate.
    fn prepare(&mut self, config: &Config) -> Result<Candidate, TuneError> {
        let described = config.to_string();
        let failed = |e: checkpoint::CheckpointError| failure(&described, &e);
        let mut source = self.base.clone();
        let mut team = None;
        config.apply(&mut source.defines, &mut team);
        if team.is_some() {
            return Err(TuneError::Objective(format!(
                "{described}: a checkpoint's team is the application's own, so a candidate on an image takes no team size; tune it with --default-driver"
            )));
        }
        if config.code_offset().is_some() {
            return Err(TuneError::Objective(format!(
                "{described}: a candidate in a restored copy is placed where its loader puts it, so it takes no code offset; tune the placement with --default-driver"
            )));
        }
        if let Some((_, candidate)) = self.prepared.iter().find(|(s, _)| *s == source) {
            return Ok(candidate.clone());
        }
        self.built += 1;
        let candidate = checkpoint::build_candidate(
            &source,
            self.scratch.path(),
            &format!("candidate{}", self.built),
        )
        .map_err(failed)?;
        if self.verify {
            let v = self
                .timer
                .verify(&candidate, self.tolerance)
                .map_err(failed)?;
            if let Some(m) = v.mismatch {
                return Err(TuneError::Failed {
                    failure: failure::Failure::Verification,
                    message: format!("{described}: verification FAILED on the image: {m}"),
                });
            }
        }
        self.prepared.push((source, candidate.clone()));
        Ok(candidate)
    }
}

/// A configuration's checkpoint error, classified for the evaluation
/// contract (a candidate that does not compile, one that crashed in a copy).
fn failure(described: &str, e: &checkpoint::CheckpointError) -> TuneError {
    let message = format!("{described}: {e}");
    match e.failure() {
        Some(failure) => TuneError::Failed { failure, message },
        None => TuneError::Objective(message),
    }
}

impl Objective for CheckpointObjective {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        crate::search::evaluate_as_round(self, config)
    }

    /// Builds every configuration of the round, then samples them
    /// round-robin, one sample each in turn, so a slow minute of the shared
    /// machine falls on all of them alike instead of on whichever was timed
    /// then. The whole round is one schedule: one restore whose copy forks a
    /// child per sample with every candidate loaded (or one restore per
    /// sample where the image cannot). A configuration that fails (build,
    /// verification, a crash in a copy) drops out with its error; the others
    /// go on.
    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        let mut state: Vec<Result<Candidate, TuneError>> =
            round.iter().map(|config| self.prepare(config)).collect();
        let ready: Vec<usize> = (0..round.len()).filter(|&i| state[i].is_ok()).collect();
        let candidates: Vec<Candidate> = ready
            .iter()
            .filter_map(|&i| state[i].as_ref().ok().cloned())
            .collect();
        // 0: the application's own code, sampled beside the candidates once.
        let first = usize::from(!self.judges_state(candidates.len()));
        let schedule: Vec<usize> = (0..self.samples)
            .flat_map(|_| first..=candidates.len())
            .collect();
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
        match self.timer.take_samples(&candidates, &schedule, false) {
            Ok(taken) => {
                for (k, run) in schedule.iter().zip(&taken.runs) {
                    if let (Some(run), Some(k)) = (run, k.checked_sub(1)) {
                        times[k].push(run.region_ns as f64);
                    }
                }
                if first == 0 {
                    self.state_judged = true;
                    let own: Vec<&checkpoint::RestoredRun> = schedule
                        .iter()
                        .zip(&taken.runs)
                        .filter(|(k, _)| **k == 0)
                        .filter_map(|(_, run)| run.as_ref())
                        .collect();
                    self.unfaithful = self.unfaithful_line(&own);
                    if let Some(line) = &self.unfaithful {
                        eprintln!("tdg tune: warning: {line}");
                    }
                }
                // The application's own code failing is no candidate's failure.
                for (k, e) in taken.failures {
                    if let Some(k) = k.checked_sub(1) {
                        let i = ready[k];
                        state[i] = Err(failure(&round[i].to_string(), &e));
                    }
                }
            }
            Err(e) => {
                for &i in &ready {
                    state[i] = Err(failure(&round[i].to_string(), &e));
                }
            }
        }
        state
            .into_iter()
            .enumerate()
            .map(|(i, slot)| {
                slot?;
                let k = ready.iter().position(|&r| r == i).expect("ready");
                let times = std::mem::take(&mut times[k]);
                Ok(Measurement {
                    time_ns: stats::Summary::of(&times).expect("samples >= 1").median,
                    mflops: None,
                    samples_ns: times,
                    uncertainty_pct: None,
                    split: None,
                    stopped: None,
                })
            })
            .collect()
    }
}
