//! Many samples per restore. The image is restored once; the restored copy,
//! stopped at the checkpoint, forks one child per sample, and each child
//! replays the delay calls and times the call exactly as a freshly restored
//! copy would (tdg_checkpoint.c, `sample_by_fork`). A sample then costs a
//! fork, not a restore.
//!
//! What keeps a forked sample exact: a first child per implementation (the
//! learning pass) runs the replay and reports the pages it wrote; every
//! sample's child copies those pages before the replay, so the timed call
//! takes no copy-on-write fault (each sample reports its minor faults). File
//! offsets the replay moves are put back after each child. An immediate
//! checkpoint's child flushes the image's pages from the caches first. What a
//! fork cannot replay (threads, pipe or socket data, shared memory the replay
//! writes) makes the copy answer `fallback=<why>`, and the caller restores
//! once per sample instead.

use crate::error::{CheckpointError, Result};
use crate::hostlib::parse_result;
use crate::restore::{
    line_field, Candidate, CopyInstructions, CopyReport, RawRestore, RestorePlan, RestoredRun,
    SamplePhases, TeamUse,
};
use std::time::Duration;

/// Candidates one sampling copy can hold (MAX_CANDIDATES in tdg_checkpoint.c).
pub const MAX_CANDIDATES: usize = 64;

/// What one restore that took many samples gave back.
#[derive(Debug)]
pub struct ForkedRestore {
    /// The samples taken, in schedule order (all of them unless the copy
    /// fell back or an implementation failed).
    pub samples: Vec<RestoredRun>,
    /// Why the copy could not take the samples by fork.
    pub fallback: Option<String>,
    /// An implementation (0 the application's code, k the k-th candidate)
    /// that failed in a child, and how; the samples before it are kept.
    pub failed: Option<(usize, CheckpointError)>,
    /// The whole restore as tdg saw it (restore, learning passes, samples).
    pub wall: Duration,
    /// What the learning passes found (None: no sample was forked).
    pub pages: Option<LearnedPages>,
    /// The copy ran threads and replayed the timed call in place instead.
    pub in_place: Option<InPlace>,
    /// The hidden-write check's fallback: the pages it found, to be
    /// confirmed on a fresh restore (`hidden_pages` of tdg_checkpoint.c).
    pub hidden: Option<HiddenPages>,
}

/// Pages an implementation's first check run wrote and its later ones did
/// not (the first 32, ascending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenPages {
    /// 0: the application's code, k: the k-th candidate.
    pub implementation: usize,
    pub pages: Vec<u64>,
}

impl HiddenPages {
    /// `candidate=K pages=0x1000,0x2000`.
    fn parse(rest: &str) -> Option<HiddenPages> {
        let implementation = line_field(rest, "candidate=")? as usize;
        let list = rest
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pages="))?;
        let pages = list
            .split(',')
            .map(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16).ok())
            .collect::<Option<Vec<u64>>>()?;
        Some(HiddenPages {
            implementation,
            pages,
        })
    }

    /// The same implementation flagged a page of `earlier` again.
    pub fn repeats(&self, earlier: &HiddenPages) -> bool {
        self.implementation == earlier.implementation
            && self.pages.iter().any(|p| earlier.pages.contains(p))
    }
}

/// A copy with threads takes its samples in place (tdg_checkpoint.c,
/// `in_place_arm`): its other threads stay parked in their runtime, and
/// the calling thread returns to the timed call's start with its stack and
/// the call's declared outputs put back between samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InPlace {
    /// The calling thread's stack from the timed call's start up, copied
    /// back after each sample.
    pub stack_bytes: u64,
    /// The declared outputs, copied back after each sample.
    pub output_bytes: u64,
    /// Threads in the copy at the timed call's first start.
    pub threads: u64,
    /// Implementations whose two check runs found no state left for a
    /// later call (tdg_checkpoint.c, "Hidden writes"), and the most pages
    /// outside the outputs and the stack one of them rewrites on every
    /// call (a workspace, the thread runtime's state).
    #[serde(default)]
    pub checked: u64,
    #[serde(default)]
    pub rewritten_pages: u64,
}

/// The pages of a checkpoint as the learning passes found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LearnedPages {
    /// Written by a replay: copied (pre-faulted) in every sample.
    pub written: u64,
    /// Present in the checkpoint's readable mappings.
    pub present: u64,
    /// Touched by a replay: flushed from the caches in every sample.
    pub flushed: u64,
}

/// `schedule=1,2,1,2`: what each forked sample runs (0: the application's
/// own code, k: `candidates[k - 1]`).
pub fn render_schedule(candidates: &[Candidate], schedule: &[usize]) -> String {
    let mut text = String::new();
    for c in candidates {
        text.push_str(&format!("candidate={}\n", c.shared_object.display()));
    }
    let entries: Vec<String> = schedule.iter().map(|k| k.to_string()).collect();
    text.push_str(&format!("schedule={}\n", entries.join(",")));
    text
}

impl RestorePlan {
    /// Whether this image's copies can take many samples per restore.
    pub fn can_fork_samples(&self) -> bool {
        self.fork_samples && self.control_channel.is_some()
    }

    /// Restore once and take every sample of `schedule` in a fork of the copy.
    pub fn restore_forked(
        &self,
        candidates: &[Candidate],
        schedule: &[usize],
    ) -> Result<ForkedRestore> {
        if !self.can_fork_samples() {
            return Err(CheckpointError::InvalidRequest(format!(
                "{} was captured by an older tdg_checkpoint.c that takes one sample per restore; \
                 rebuild the application with `tdg checkpoint lib` and recapture",
                self.image.display()
            )));
        }
        if let Some(&k) = schedule.iter().find(|&&k| k > candidates.len()) {
            return Err(CheckpointError::InvalidRequest(format!(
                "sample schedule names implementation {k} of {}",
                candidates.len()
            )));
        }
        // The limit is each sample's (and each learning pass's): every line
        // the copy reports starts it again.
        let RawRestore {
            outcome,
            wall,
            text,
            log,
        } = self.run_restore(&render_schedule(candidates, schedule), self.timeout)?;
        let mut forked = parse_forked(&text, schedule.len(), wall);
        if let Some((k, sample)) = failed_implementation(&text) {
            let instructions = CopyInstructions {
                candidate: k.checked_sub(1).and_then(|i| candidates.get(i)).cloned(),
                outputs: None,
            };
            let report = CopyReport::parse(&text);
            let error = self
                .reported_failure(&report, sample, &instructions, &log)
                .unwrap_or_else(|| CheckpointError::CopyFailed {
                    image: self.image.clone(),
                    sample,
                    detail: "ended without reporting its time".into(),
                    log: Self::kept(&log),
                });
            forked.failed = Some((k, error));
        }
        let complete = forked.samples.len() == schedule.len();
        if complete || forked.fallback.is_some() || forked.failed.is_some() {
            let _ = std::fs::remove_file(&log);
            return Ok(forked);
        }
        Err(match outcome {
            Err(e) => self.restorer_failed(e, forked.samples.len() + 1, &log),
            Ok(_) => CheckpointError::CopyFailed {
                image: self.image.clone(),
                sample: forked.samples.len() + 1,
                detail: format!(
                    "ended after {} of {} forked samples without saying why",
                    forked.samples.len(),
                    schedule.len()
                ),
                log: Self::kept(&log),
            },
        })
    }
}

/// `sample_failed=<i> candidate=<k> status=<s>` (i = -1: a learning pass),
/// or `failed_candidate=<k>` (it could not be loaded): the implementation
/// and the 1-based sample.
pub fn failed_implementation(text: &str) -> Option<(usize, usize)> {
    text.lines().find_map(|l| {
        if let Some(rest) = l.strip_prefix("sample_failed=") {
            let sample = rest
                .split_whitespace()
                .next()?
                .parse::<i64>()
                .ok()
                .map(|i| (i + 1).max(1) as usize)?;
            Some((line_field(l, "candidate=")? as usize, sample))
        } else {
            l.strip_prefix("failed_candidate=")
                .and_then(|k| k.trim().parse().ok())
                .map(|k| (k, 1))
        }
    })
}

/// The samples a sampling copy reported, in order (`expected`: how many
/// the schedule asked for, a capacity hint only).
pub fn parse_forked(text: &str, expected: usize, wall: Duration) -> ForkedRestore {
    let mut forked = ForkedRestore {
        samples: Vec::with_capacity(expected.min(text.len() / 8 + 1)),
        fallback: None,
        failed: None,
        wall,
        pages: None,
        in_place: None,
        hidden: None,
    };
    // A copy with threads reports them before each sample's time line.
    let mut team = None;
    for line in text.lines() {
        if let Some(reason) = line.strip_prefix("fallback=") {
            forked.fallback = Some(reason.to_string());
        } else if line.starts_with("learned ") {
            let present = line_field(line, "present=").unwrap_or(0);
            forked.pages = Some(LearnedPages {
                written: line_field(line, "pages=").unwrap_or(0),
                present,
                // an older library flushed every present page
                flushed: line_field(line, "flushed=").unwrap_or(present),
            });
        } else if let Some(rest) = line.strip_prefix("in_place ") {
            forked.in_place = Some(InPlace {
                stack_bytes: line_field(rest, "stack_bytes=").unwrap_or(0),
                output_bytes: line_field(rest, "output_bytes=").unwrap_or(0),
                threads: line_field(rest, "threads=").unwrap_or(0),
                checked: 0,
                rewritten_pages: 0,
            });
        } else if let Some(rest) = line.strip_prefix("hidden_check ") {
            if let Some(p) = forked.in_place.as_mut() {
                p.checked += 1;
                p.rewritten_pages = p
                    .rewritten_pages
                    .max(line_field(rest, "rewritten=").unwrap_or(0));
            }
        } else if let Some(rest) = line.strip_prefix("hidden_pages ") {
            forked.hidden = HiddenPages::parse(rest);
        } else if let Some(t) = TeamUse::parse(line) {
            team = Some(t);
        } else if line.starts_with("ns=") {
            let Some((region_ns, region_cpu_ns)) = parse_result(line) else {
                continue;
            };
            forked.samples.push(RestoredRun {
                region_ns,
                region_cpu_ns,
                wall: Duration::ZERO,
                outputs: Vec::new(),
                minor_faults: line_field(line, "minflt="),
                phases: Some(SamplePhases {
                    fork_ns: line_field(line, "fork_ns=").unwrap_or(0),
                    prepare_ns: line_field(line, "prepare_ns=").unwrap_or(0),
                    prepare_faults: line_field(line, "prepare_faults=").unwrap_or(0),
                    flush_ns: line_field(line, "flush_ns=").unwrap_or(0),
                    delay_ns: line_field(line, "delay_ns=").unwrap_or(0),
                }),
                team: team.take(),
                state: crate::fidelity::CallState::parse(line),
                kept_log: None,
            });
        } else if line.starts_with("sample_end=") {
            if let (Some(last), Some(ns)) =
                (forked.samples.last_mut(), line_field(line, "wall_ns="))
            {
                last.wall = Duration::from_nanos(ns);
            }
        }
    }
    forked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_failures_and_fallbacks_are_read_from_the_copy() {
        let text = "learned pages=12 present=900 flushed=40 file_present=30\n\
                    ns=100 cpu_ns=120 overhead_ns=19.0 minflt=0 sample=0 prepare_ns=5000 delay_ns=700\n\
                    sample_end=0 wall_ns=90000\n\
                    ns=110 cpu_ns=130 overhead_ns=19.0 minflt=2 sample=1 prepare_ns=5100 delay_ns=710\n\
                    sample_end=1 wall_ns=91000\n\
                    crash=11 phase=the timed call\n\
                    sample_failed=2 candidate=2 status=5\n";
        let f = parse_forked(text, 4, Duration::from_millis(5));
        assert_eq!(f.samples.len(), 2);
        assert_eq!(f.samples[1].region_ns, 110);
        assert_eq!(f.samples[1].minor_faults, Some(2));
        assert_eq!(f.samples[0].wall, Duration::from_nanos(90000));
        assert_eq!(f.samples[0].phases.unwrap().delay_ns, 700);
        assert_eq!(
            f.pages,
            Some(LearnedPages {
                written: 12,
                present: 900,
                flushed: 40
            })
        );
        assert_eq!(failed_implementation(text), Some((2, 3)));
        let threaded = parse_forked(
            "in_place stack_bytes=12000 output_bytes=2097152 threads=2\n\
             team threads=2 busy_threads=2 team_cpu_ns=170000\n\
             ns=160000 cpu_ns=80000 overhead_ns=19.0 minflt=0 sample=0 fork_ns=0 prepare_ns=300000\n\
             sample_end=0 wall_ns=600000\n\
             ns=150000 cpu_ns=80000 overhead_ns=19.0 minflt=0 sample=1 fork_ns=0 prepare_ns=300000\n",
            2,
            Duration::ZERO,
        );
        assert_eq!(
            threaded.in_place,
            Some(InPlace {
                stack_bytes: 12000,
                output_bytes: 2097152,
                threads: 2,
                checked: 0,
                rewritten_pages: 0,
            })
        );
        assert_eq!(
            threaded.samples[0].team,
            Some(TeamUse {
                threads: 2,
                busy_threads: 2,
                cpu_ns: 170000
            })
        );
        assert_eq!(
            threaded.samples[1].team, None,
            "a team line belongs to the sample after it"
        );
        let learning = "sample_failed=-1 candidate=1 status=133\n";
        assert_eq!(failed_implementation(learning), Some((1, 1)));
        let fallback = parse_forked(
            "fallback=the replay reads descriptor 5\n",
            3,
            Duration::ZERO,
        );
        assert_eq!(
            fallback.fallback.as_deref(),
            Some("the replay reads descriptor 5")
        );
        let flagged = parse_forked(
            "in_place stack_bytes=12000 output_bytes=2097152 threads=2\n\
             hidden_pages candidate=1 pages=0x7f0000001000,0x7f0000003000\n\
             fallback=candidate 1's timed call wrote 2 page(s)\n",
            3,
            Duration::ZERO,
        );
        assert_eq!(
            flagged.hidden,
            Some(HiddenPages {
                implementation: 1,
                pages: vec![0x7f00_0000_1000, 0x7f00_0000_3000]
            })
        );
        assert_eq!(
            parse_forked(
                "hidden_pages candidate=0 pages=0x1000,zz\n",
                1,
                Duration::ZERO
            )
            .hidden,
            None,
            "a garbled list names no page"
        );
        assert_eq!(
            render_schedule(&[], &[0, 0, 0]),
            "schedule=0,0,0\n",
            "the application's own code needs no candidate line"
        );
    }
}
