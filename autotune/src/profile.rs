//! Step 1: the program as it runs. Plain runs give its whole time (and
//! show it succeeds and what it prints); as many runs under the spec's
//! profiling shim, interleaved with them, give the routine's calls, their
//! contexts and their time inside the program. The routine's share of the
//! whole run is the Amdahl bound on any gain from tuning it.

use crate::program::{Launch, Program, ProgramRun};
use crate::AutotuneError;
use instrument::contexts::ContextsFile;
use instrument::report::Report;
use instrument::{format, interpose, report, session, specgen};
use serde::{Deserialize, Serialize};
use spec_lang::CheckedSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the program's plain runs and its profile say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramProfile {
    /// Whole-program wall times of the plain runs, seconds.
    pub plain_runs_s: Vec<f64>,
    pub plain_median_s: f64,
    /// All calls of the routine the profile recorded.
    pub calls: u64,
    /// Time inside the routine over the whole run (interrupted calls
    /// aside), nanoseconds.
    pub routine_ns: f64,
    /// The profiled run's own wall time: the routine's time and the run's
    /// are measured together, at one speed of the shared host.
    pub profiled_wall_s: f64,
    /// `routine_ns` over `profiled_wall_s` (at most 1): of the profiled
    /// runs, the one whose share is the median is the profile.
    pub share: f64,
    /// Every profiled run's share, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiled_shares: Vec<f64>,
    /// 1 / (1 - share): the speedup if the routine took no time at all.
    pub amdahl_bound: f64,
    /// The object whose definition the program calls.
    pub defined_in: String,
    /// Threads that called the routine.
    pub threads: usize,
    /// The profile file, the spec with the contexts' macros, and the
    /// contexts file (with the `-D` values that select each context).
    pub profile_file: PathBuf,
    pub profiled_spec: PathBuf,
    pub contexts_file: PathBuf,
}

/// The profile step's results beside the record.
pub struct Profiled {
    pub summary: ProgramProfile,
    pub report: Report,
    pub contexts: ContextsFile,
    /// The preload shim, for the in-app side of later comparisons.
    pub shim: PathBuf,
    /// The first plain run (its output is the reference).
    pub reference_run: ProgramRun,
}

impl Profiled {
    /// A context as people read it: its values as the program passed them
    /// (a double as a number, not its bits).
    pub fn label(&self, rank: usize) -> String {
        match self.report.contexts.iter().find(|c| c.rank == rank) {
            Some(c) => c.label(),
            None => self
                .contexts
                .contexts
                .iter()
                .find(|c| c.rank == rank)
                .map_or_else(|| format!("rank {rank}"), |c| c.label()),
        }
    }
}

/// Where the profile step works and what it is given.
pub struct ProfileRequest<'a> {
    pub program: &'a Program,
    pub spec: &'a CheckedSpec,
    pub spec_path: &'a Path,
    pub include_dirs: Vec<PathBuf>,
    pub cc: Option<&'a str>,
    pub plain_runs: usize,
    /// The work directory (tdg's own).
    pub work: &'a Path,
}

/// One run of the program under the profiling shim.
pub struct ProfiledRun {
    /// The report for the routine.
    pub report: Report,
    /// What the shim recorded, as `tdg profile` writes it.
    pub profile: instrument::format::Profile,
    /// The run's wall time, seconds.
    pub wall_s: f64,
}

impl ProfiledRun {
    /// The routine's share of the run. Interrupted calls measure the
    /// scheduler, not the routine, and are left out.
    pub fn share(&self) -> f64 {
        (self.report.uninterrupted_total_ns * 1e-9 / self.wall_s).clamp(0.0, 1.0)
    }
}

/// A profiled run of the program: its report for `routine`, its profile
/// and the run's wall time.
pub fn profiled_run(
    program: &Program,
    shim: &Path,
    routine: &str,
    work: &Path,
) -> Result<ProfiledRun, AutotuneError> {
    let out = toolchain::scratch_dir("tdg-autotune-profile")?;
    let started = std::time::Instant::now();
    let outcome = session::run_profiled_with(
        &program.argv,
        Some(shim),
        &session::RuntimeSettings::default(),
        out.path(),
        session::ProgramOutput::Discard {
            limit: program.timeout,
        },
    )?;
    let wall_s = started.elapsed().as_secs_f64();
    if !outcome.status.success() {
        return Err(AutotuneError::ProgramFailed {
            program: program.name(),
            how: format!("{} under the profiling shim", outcome.how_it_ended()),
        });
    }
    if let Some(lost) = outcome.lost.first() {
        return Err(AutotuneError::Profile(format!(
            "{lost}; free space in {} and run again",
            work.display()
        )));
    }
    let rep = report::build(
        &outcome.profile,
        &report::ReportOptions {
            routine: Some(routine.to_string()),
            ..Default::default()
        },
    )
    .map_err(|e| AutotuneError::Profile(e.to_string()))?;
    Ok(ProfiledRun {
        report: rep,
        profile: outcome.profile,
        wall_s,
    })
}

/// Median time per call of each context of `report`, by the context's
/// values (the same context has another rank in another run).
pub fn medians_by_values(report: &Report) -> BTreeMap<BTreeMap<String, i64>, f64> {
    report
        .contexts
        .iter()
        .map(|c| {
            (
                c.values.iter().map(|v| (v.name.clone(), v.value)).collect(),
                c.all.median,
            )
        })
        .collect()
}

pub fn profile(req: &ProfileRequest) -> Result<Profiled, AutotuneError> {
    // The first plain run shows the program succeeds before a shim is built.
    let first = plain_run(req.program)?;
    let cc = toolchain::CCompiler::find(req.cc)?;
    let shim_dir = req.work.join("shim");
    let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
    let shims =
        interpose::build_interposers(&cc, req.spec, &shim_dir, &req.include_dirs, cache.as_ref())?;
    let routine = req.spec.routine.name.name.clone();
    let Runs {
        mut plain,
        mut profiled,
    } = interleaved_runs(req, first, &shims.preload_shim, &routine)?;
    let profiled_shares: Vec<f64> = profiled.iter().map(ProfiledRun::share).collect();
    let mut by_share: Vec<usize> = (0..profiled.len()).collect();
    by_share.sort_by(|a, b| profiled_shares[*a].total_cmp(&profiled_shares[*b]));
    let chosen = profiled.swap_remove(by_share[by_share.len() / 2]);
    let profile_file = req.work.join(format!("{routine}.tdgp"));
    format::write(&chosen.profile, &profile_file)?;
    let (rep, profiled_wall_s) = (chosen.report, chosen.wall_s);
    let derived = write_profiled_spec(req, &rep, &routine)?;
    let walls: Vec<f64> = plain.iter().map(|r| r.wall.as_secs_f64()).collect();
    let median = stats::Summary::of(&walls).expect("one run at least").median;
    // The share is of the run the routine's time was measured in (the
    // plain runs give the program's time).
    let share = profiled_shares[by_share[by_share.len() / 2]];
    let summary = ProgramProfile {
        plain_runs_s: walls,
        plain_median_s: median,
        calls: rep.calls,
        routine_ns: rep.uninterrupted_total_ns,
        profiled_wall_s,
        share,
        profiled_shares,
        amdahl_bound: if share < 1.0 {
            1.0 / (1.0 - share)
        } else {
            f64::INFINITY
        },
        defined_in: rep.defined_in.clone(),
        threads: rep.threads,
        profile_file,
        profiled_spec: derived.profiled_spec,
        contexts_file: derived.contexts_file,
    };
    Ok(Profiled {
        summary,
        contexts: derived.contexts,
        report: rep,
        shim: shims.preload_shim,
        reference_run: plain.swap_remove(0),
    })
}

/// One plain run of `program`, which must succeed.
fn plain_run(program: &Program) -> Result<ProgramRun, AutotuneError> {
    let run = program.run(&Launch::default())?;
    if !run.succeeded() {
        return Err(AutotuneError::ProgramFailed {
            program: program.name(),
            how: run.how_it_ended(),
        });
    }
    Ok(run)
}

/// The plain runs and the profiled runs, in the order they ran.
struct Runs {
    plain: Vec<ProgramRun>,
    profiled: Vec<ProfiledRun>,
}

/// After `first`, a profiled run after each plain run, so that both see
/// the host at the same moments; one run's share can be off by a slow
/// start or a busy neighbour, the median run's is the profile.
fn interleaved_runs(
    req: &ProfileRequest,
    first: ProgramRun,
    shim: &Path,
    routine: &str,
) -> Result<Runs, AutotuneError> {
    let mut runs = Runs {
        plain: vec![first],
        profiled: Vec::new(),
    };
    for k in 0..req.plain_runs.max(1) {
        if k > 0 {
            runs.plain.push(plain_run(req.program)?);
        }
        runs.profiled
            .push(profiled_run(req.program, shim, routine, req.work)?);
    }
    Ok(runs)
}

/// The spec with the contexts' macros and the contexts file, derived from
/// the profile's report.
struct ProfiledSpec {
    profiled_spec: PathBuf,
    contexts_file: PathBuf,
    contexts: ContextsFile,
}

/// The profiled spec and its contexts file, written in the work directory.
fn write_profiled_spec(
    req: &ProfileRequest,
    rep: &Report,
    routine: &str,
) -> Result<ProfiledSpec, AutotuneError> {
    let profiled_spec = req.work.join(format!("{routine}.profiled.spec"));
    // Where the original sits in its page says nothing of where a
    // candidate's code will: the drivers place code as they would any.
    let unplaced = Report {
        code_page_offset: None,
        ..rep.clone()
    };
    let derived = specgen::derive(
        req.spec,
        req.spec.source(),
        &req.spec_path.display().to_string(),
        &unplaced,
        // Rank 1 holds the most time: the profiled spec's defaults.
        1,
        Some(profiled_spec.display().to_string()),
    )
    .map_err(|e| AutotuneError::Profile(e.to_string()))?;
    fsguard::write_atomic(&profiled_spec, derived.edit.text.as_bytes())?;
    let contexts_file = req.work.join(format!("{routine}.contexts.json"));
    fsguard::write_atomic(&contexts_file, derived.contexts.to_json().as_bytes())?;
    Ok(ProfiledSpec {
        profiled_spec,
        contexts_file,
        contexts: derived.contexts,
    })
}
