//! `tdg autotune`, step by step: profile the program, choose the contexts
//! that hold its time in the routine, find a faithful target for each,
//! search the candidate on the program's predicted time (once over all
//! contexts, then per context), keep a context's own configuration only
//! where re-timing shows it beats the shared one, deploy, and prove the
//! gain with whole-program runs. The searches themselves are `tdg tune`'s
//! ([`Searcher`]): the same strategies, campaigns, executors and logs.

use crate::choose::{choose, Choice, Cover};
use crate::deploy::{deploy, DeployRequest, VariantBuild, DEPLOY_DIR};
use crate::fidelity::FidelityRules;
use crate::profile::{profile, ProfileRequest, Profiled, ProgramProfile};
use crate::program::{Launch, Program};
use crate::proof::{
    prove, Order, Proof, ProofError, ProofRules, ProofVerdict, Round, Side, Speedup,
};
use crate::record::{
    host_cpu, ContextChoice, Deployment, Outcome, Prediction, Record, SearchRecord, FORMAT_NAME,
    FORMAT_VERSION,
};
use crate::targets::{find_targets, ContextTarget, Target, TargetRequest};
use crate::AutotuneError;
use config::Config;
use driver_gen::RunOptions;
use instrument::contexts::{ContextEntry, ContextsFile};
use instrument::interpose::DispatchRoute;
use serde::{Deserialize, Serialize};
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One search of the candidate, as `tdg tune --contexts` runs it.
pub struct SearchTask<'a> {
    /// The profiled spec (its macros select each context).
    pub spec: &'a Path,
    /// The contexts to score over, each with its target.
    pub contexts_file: &'a Path,
    pub contexts: usize,
    /// Where its campaign and its log go.
    pub campaign: &'a Path,
    pub log: &'a Path,
    /// "all contexts", or the context's label.
    pub over: String,
    /// End with the best few listed, not re-timed among themselves: the
    /// caller re-times them against the original.
    pub leave_finalists: bool,
}

/// One side-by-side re-timing: `configs` timed again in every context of
/// `contexts_file`, `rounds` times over.
pub struct RetimeTask<'a> {
    pub spec: &'a Path,
    pub contexts_file: &'a Path,
    pub configs: &'a [Config],
    /// The C that calls the program's own definition: the original
    /// routine on the same targets in the same rounds, last in each round.
    pub original: Option<&'a Path>,
    pub rounds: usize,
}

/// A re-timing's times: per round, per configuration (then the original,
/// when it was re-timed), each context's predicted time per call.
pub type Retimed = Vec<Vec<Vec<f64>>>;

/// The searches and the re-timing, done with `tdg tune`'s machinery and
/// the user's search options.
pub trait Searcher {
    fn search(&mut self, task: &SearchTask) -> Result<SearchRecord, AutotuneError>;

    /// `task`'s configurations timed again side by side. One objective
    /// serves every round (a checkpoint's image is opened once).
    fn retime(&mut self, task: &RetimeTask) -> Result<Retimed, AutotuneError>;
}

/// What the user sees of the run.
pub trait Progress {
    /// A step begins (1 to 7).
    fn step(&mut self, n: usize, what: &str);
    /// One line within the step.
    fn note(&mut self, line: &str);
}

/// Everything one `tdg autotune` needs.
pub struct AutotuneRequest {
    pub program: Program,
    pub spec_path: PathBuf,
    /// Checked for the profiling use (a prototype is enough).
    pub spec: CheckedSpec,
    pub implementation: PathBuf,
    pub extra: Vec<PathBuf>,
    pub include_dirs: Vec<PathBuf>,
    pub cc: Option<String>,
    pub cflags: Vec<String>,
    /// The drivers' options (timing settings, timeout, compiler).
    pub driver: RunOptions,
    /// The deployment directory (tdg's own).
    pub dir: PathBuf,
    pub cover: Cover,
    pub plain_runs: usize,
    pub fidelity: FidelityRules,
    pub proof: ProofRules,
    /// Try checkpoints where no driver matches.
    pub checkpoints: bool,
    /// Search each context on its own too.
    pub specialise: bool,
    /// Re-time each chosen configuration with its code at the other
    /// positions against 64-byte fetch blocks and deploy it where it is
    /// proven fastest.
    pub place: bool,
    /// Side-by-side re-timings deciding each context's configuration.
    pub retime_rounds: usize,
    /// Reuse the profile and targets `dir` holds, resume each search's campaign.
    pub resume: bool,
    /// The words this run was started with (after `autotune`), stored for
    /// `--resume`.
    pub words: Vec<String>,
}

/// The steps, for progress.
pub const STEPS: usize = 7;

/// Steps 1 to 3 as a resumed run finds them: the program's profile, the
/// contexts chosen and their targets, and the inputs they were measured
/// with (`DIR/work/state.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub version: u32,
    /// SHA-256 of the spec, the candidate and its extra files and the
    /// program's executable, as they were.
    pub inputs: Vec<(String, PathBuf, String)>,
    pub profile: ProgramProfile,
    pub cover_reached: f64,
    pub targets: Vec<ContextTarget>,
}

const MEASURED_FILE: &str = "state.json";
const MEASURED_VERSION: u32 = 1;
/// The words a run was started with, for `--resume`.
pub const ARGS_FILE: &str = "autotune-args.json";

/// What `--resume` reads back to run again as it was started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredArgs {
    pub cwd: PathBuf,
    pub words: Vec<String>,
}

impl StoredArgs {
    pub fn load(dir: &Path) -> Result<StoredArgs, AutotuneError> {
        let path = dir.join("work").join(ARGS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            AutotuneError::Usage(format!(
                "{}: {e}; --resume takes a directory `tdg autotune -o DIR` wrote",
                path.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| {
            AutotuneError::Usage(format!(
                "{}: not what tdg autotune stores ({e}); run tdg autotune again without --resume",
                path.display()
            ))
        })
    }
}

/// The files a run's measurements depend on, hashed as they are now.
fn input_digests(req: &AutotuneRequest) -> Result<Vec<(String, PathBuf, String)>, AutotuneError> {
    use sha2::Digest;
    let program = req.program.executable();
    let files = [
        ("spec", req.spec_path.clone()),
        ("implementation", req.implementation.clone()),
    ]
    .into_iter()
    .chain(req.extra.iter().map(|e| ("extra", e.clone())))
    .chain(program.map(|p| ("program", p)));
    files
        .map(|(role, path)| {
            let bytes = std::fs::read(&path).map_err(|e| {
                AutotuneError::Usage(format!("cannot read the {role} {}: {e}", path.display()))
            })?;
            Ok((
                role.to_string(),
                path,
                format!("{:x}", sha2::Sha256::digest(&bytes)),
            ))
        })
        .collect()
}

/// The seven steps: a program made faster, proven, and recorded in
/// `req.dir`.
pub fn autotune(
    req: &AutotuneRequest,
    searcher: &mut dyn Searcher,
    progress: &mut dyn Progress,
) -> Result<Record, AutotuneError> {
    let mut timer = StepTimer::new();
    let dir = fsguard::OwnedDir::open(&req.dir, DEPLOY_DIR)?;
    let work = fsguard::OwnedDir::open(&dir.path().join("work"), DEPLOY_DIR)?;
    let work = work.path();
    let measured = measured_or_resumed(req, dir.path(), work, progress, &mut timer)?;
    let contexts = ContextsFile::load(&measured.profile.contexts_file)
        .map_err(|e| AutotuneError::Profile(e.to_string()))?;
    let faithful = faithful_targets(&measured.targets)?;
    let all_file = work.join("targets.contexts.json");
    write_contexts(&contexts, &faithful, &all_file, req.resume)?;

    progress.step(4, "tune on the program's time");
    // The original as the drivers time it, beside every re-timed
    // configuration (targets.rs writes it where a driver was tried).
    let original = Some(work.join(crate::targets::ORIGINAL_SOURCE)).filter(|p| p.is_file());
    let tuning = Tuning {
        req,
        work,
        profile: &measured.profile,
        contexts: &contexts,
        faithful: &faithful,
        all_file: &all_file,
        original: original.as_deref(),
    };
    let tuned = tune(&tuning, searcher, progress)?;
    timer.lap("tune");

    progress.step(5, "deploy");
    let deployment = deploy_choices(req, dir.path(), &tuned.choices, &faithful)?;
    say_deployed(&deployment, progress);
    timer.lap("deploy");

    progress.step(6, "prove it in the program");
    let proof = prove_in_program(req, &deployment, progress)?;
    timer.lap("prove");

    progress.step(7, "record");
    let record = record_of(req, measured, tuned, deployment, proof, timer.laps);
    record.write(dir.path())?;
    crate::readme::write(dir.path(), &record)?;
    Ok(record)
}

/// Steps 1 to 3, measured now (the run's words stored for `--resume`
/// first), or as `--resume` finds them in `work`.
fn measured_or_resumed(
    req: &AutotuneRequest,
    dir: &Path,
    work: &Path,
    progress: &mut dyn Progress,
    timer: &mut StepTimer,
) -> Result<Measured, AutotuneError> {
    let inputs = input_digests(req)?;
    let state = work.join(MEASURED_FILE);
    if let (true, Ok(text)) = (req.resume, std::fs::read_to_string(&state)) {
        let m = resumed(&text, &state, &inputs)?;
        progress.note(&format!(
            "resuming {}: the profile and the targets measured before, each search from its campaign",
            dir.display()
        ));
        return Ok(m);
    }
    let stored = StoredArgs {
        cwd: req.program.cwd.clone(),
        words: req.words.clone(),
    };
    fsguard::write_atomic(
        &work.join(ARGS_FILE),
        serde_json::to_string_pretty(&stored)
            .expect("plain data")
            .as_bytes(),
    )?;
    let m = measure(req, work, inputs, progress, timer)?;
    fsguard::write_atomic(
        &state,
        serde_json::to_string_pretty(&m)
            .expect("plain data")
            .as_bytes(),
    )?;
    Ok(m)
}

/// The steps `state` (read as `text`) holds, refused when damaged or when
/// an input changed since they were measured.
fn resumed(
    text: &str,
    state: &Path,
    inputs: &[(String, PathBuf, String)],
) -> Result<Measured, AutotuneError> {
    let m: Measured = serde_json::from_str(text)
        .ok()
        .filter(|m: &Measured| m.version == MEASURED_VERSION)
        .ok_or_else(|| {
            AutotuneError::Usage(format!(
                "{} is damaged or from another tdg; run tdg autotune again without --resume",
                state.display()
            ))
        })?;
    if let Some((role, path, _)) = m.inputs.iter().find(|i| !inputs.contains(i)) {
        return Err(AutotuneError::Usage(format!(
            "the {role} {} changed since the profile and the targets were measured; run tdg autotune again without --resume",
            path.display()
        )));
    }
    Ok(m)
}

/// The targets that were found faithful, or why none was.
fn faithful_targets(targets: &[ContextTarget]) -> Result<Vec<&ContextTarget>, AutotuneError> {
    let faithful: Vec<&ContextTarget> = targets.iter().filter(|t| t.target.is_some()).collect();
    if faithful.is_empty() {
        return Err(AutotuneError::NoFaithfulTarget(
            targets
                .iter()
                .map(|t| format!("{}: {}", t.label, t.rejected.join("; ")))
                .collect::<Vec<_>>()
                .join(" | "),
        ));
    }
    Ok(faithful)
}

/// What step 4 tunes on.
struct Tuning<'a> {
    req: &'a AutotuneRequest,
    work: &'a Path,
    profile: &'a ProgramProfile,
    contexts: &'a ContextsFile,
    /// The contexts with a faithful target.
    faithful: &'a [&'a ContextTarget],
    /// Their contexts file, each with its target.
    all_file: &'a Path,
    /// The C calling the program's own definition, re-timed beside.
    original: Option<&'a Path>,
}

/// What step 4 decided.
struct Tuned {
    searches: Vec<SearchRecord>,
    choices: Vec<ContextChoice>,
    prediction: Prediction,
}

/// Step 4: the searches, each context's configuration, where its code is
/// placed, and the program's predicted time.
fn tune(
    t: &Tuning,
    searcher: &mut dyn Searcher,
    progress: &mut dyn Progress,
) -> Result<Tuned, AutotuneError> {
    let mut searched = search(t, searcher, progress)?;
    let choices = decide(t, searcher, &mut searched, progress)?;
    let choices = if t.req.place {
        place(
            &PlaceRequest {
                spec: &t.profile.profiled_spec,
                contexts_file: t.all_file,
                original: t.original,
                base: deployed_offset(t.req, &Config::new()),
                rounds: t.req.retime_rounds,
            },
            searcher,
            t.faithful,
            choices,
            &searched.searches,
            progress,
        )?
    } else {
        choices
    };
    let prediction = predict(t.profile, t.contexts, t.faithful, &choices);
    progress.note(&format!(
        "predicted: {:.3} s, {:.3}x faster (Amdahl bound {:.2}x)",
        prediction.program_s, prediction.speedup, t.profile.amdahl_bound
    ));
    Ok(Tuned {
        searches: searched.searches,
        choices,
        prediction,
    })
}

/// The searches' outcome.
struct Searched {
    /// The search over all contexts first, then one per context.
    searches: Vec<SearchRecord>,
    /// Per faithful context, where in `searches` its own search is (none
    /// where it had no search of its own).
    own_search: Vec<Option<usize>>,
}

/// What the re-timing against the original chooses from for `search`: its
/// finalists, or its best alone.
fn candidates(search: &SearchRecord) -> Vec<Config> {
    if search.finalists.is_empty() {
        vec![search.best.clone()]
    } else {
        search.finalists.clone()
    }
}

/// The search over all contexts, then, when specialising, one per context.
/// Each leaves its finalists to [`decide`]: re-timed among themselves
/// they would be timed twice, and only against the original do their
/// times say what the program would feel. The searches' finalists overlap
/// (often they are the same few), so one re-timing serves them all.
fn search(
    t: &Tuning,
    searcher: &mut dyn Searcher,
    progress: &mut dyn Progress,
) -> Result<Searched, AutotuneError> {
    let spec = &t.profile.profiled_spec;
    let joint = searcher.search(&SearchTask {
        spec,
        contexts_file: t.all_file,
        contexts: t.faithful.len(),
        campaign: &t.work.join("all.campaign"),
        log: &t.work.join("all.tune.jsonl"),
        over: "all contexts".into(),
        leave_finalists: true,
    })?;
    progress.note(&format!(
        "over all contexts, the best by the search's own times: {}",
        config::listed(&candidates(&joint))
    ));
    let mut searched = Searched {
        searches: vec![joint],
        own_search: vec![None; t.faithful.len()],
    };
    if !(t.req.specialise && t.faithful.len() > 1) {
        return Ok(searched);
    }
    for (i, target) in t.faithful.iter().enumerate() {
        let file = t
            .work
            .join(format!("context-{}.contexts.json", target.rank));
        write_contexts(t.contexts, &[*target], &file, t.req.resume)?;
        let s = searcher.search(&SearchTask {
            spec,
            contexts_file: &file,
            contexts: 1,
            campaign: &t.work.join(format!("context-{}.campaign", target.rank)),
            log: &t.work.join(format!("context-{}.tune.jsonl", target.rank)),
            over: target.label.clone(),
            leave_finalists: true,
        })?;
        progress.note(&format!(
            "context {}, the best by its search's own times: {}",
            target.label,
            config::listed(&candidates(&s))
        ));
        searched.own_search[i] = Some(searched.searches.len());
        searched.searches.push(s);
    }
    Ok(searched)
}

/// Step 5's lines: where the deployment is, how to use it, and each copy
/// whose code is not where it was timed.
fn say_deployed(deployment: &Deployment, progress: &mut dyn Progress) {
    progress.note(&format!(
        "{}: {} configuration(s) behind a dispatcher on the contexts' values; `tdg autotune exec {} -- PROGRAM` runs a command with it",
        deployment.preload_library.display(),
        deployment.variants.len(),
        deployment.dir.display()
    ));
    for m in &deployment.misplaced {
        progress.note(&format!(
            "warning: {m}; the measured gain may differ from the predicted one"
        ));
    }
}

/// Step 6: plain and tuned whole-program runs until the proof decides. A
/// deployment that breaks the program, or changes what it prints, loses
/// its libraries.
fn prove_in_program(
    req: &AutotuneRequest,
    deployment: &Deployment,
    progress: &mut dyn Progress,
) -> Result<Proof, AutotuneError> {
    let launch_tuned = Launch {
        preload: Some(deployment.preload_library.clone()),
        env: Vec::new(),
    };
    let mut round_number = 0;
    let proved = prove(
        &req.proof,
        |side| match side {
            Side::Plain => req.program.run(&Launch::default()),
            Side::Tuned => req.program.run(&launch_tuned),
        },
        |round, speedup| {
            round_number += 1;
            progress.note(&format!(
                "round {round_number}: plain {:.3} s, tuned {:.3} s{}",
                round.plain_s,
                round.tuned_s,
                speedup
                    .map(|s| format!("; speedup {}", s.text()))
                    .unwrap_or_default()
            ))
        },
    );
    match proved {
        Ok(p) => Ok(p),
        Err(e @ (ProofError::OutputChanged { .. } | ProofError::TunedFailed { .. })) => {
            // Nobody should run a deployment that breaks the program.
            let _ = std::fs::remove_file(&deployment.preload_library);
            let _ = std::fs::remove_file(&deployment.wrap_archive);
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Step 7: the record of the run.
fn record_of(
    req: &AutotuneRequest,
    measured: Measured,
    tuned: Tuned,
    deployment: Deployment,
    proof: Proof,
    step_seconds: Vec<(String, f64)>,
) -> Record {
    let outcome = if proof.verdict == ProofVerdict::Faster {
        Outcome::Faster
    } else {
        Outcome::NotFaster
    };
    Record {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        routine: req.spec.routine.name.name.clone(),
        spec: req.spec_path.clone(),
        implementation: req.implementation.clone(),
        program: req
            .program
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        cwd: req.program.cwd.clone(),
        host: host_cpu(),
        date: formats::machine::date_now(),
        profile: measured.profile,
        cover_asked: req.cover.share,
        cover_reached: measured.cover_reached,
        contexts: measured.targets,
        searches: tuned.searches,
        choices: tuned.choices,
        prediction: tuned.prediction,
        deployment,
        proof,
        outcome,
        step_seconds,
    }
}

/// Steps 1 to 3: the program profiled, its contexts chosen, a target found
/// for each.
fn measure(
    req: &AutotuneRequest,
    work: &Path,
    inputs: Vec<(String, PathBuf, String)>,
    progress: &mut dyn Progress,
    timer: &mut StepTimer,
) -> Result<Measured, AutotuneError> {
    progress.step(1, "profile the program");
    let profiled = profile_program(req, work, progress)?;
    timer.lap("profile");

    progress.step(2, "choose the contexts");
    let choice = choose_contexts(req, &profiled, progress);
    timer.lap("choose");

    progress.step(3, "a faithful target for each context");
    let targets = target_contexts(req, work, &profiled, &choice.ranks, progress)?;
    timer.lap("targets");
    Ok(Measured {
        version: MEASURED_VERSION,
        inputs,
        profile: profiled.summary.clone(),
        cover_reached: choice.share,
        targets,
    })
}

/// Step 1: the profile, and the bound it puts on any gain.
fn profile_program(
    req: &AutotuneRequest,
    work: &Path,
    progress: &mut dyn Progress,
) -> Result<Profiled, AutotuneError> {
    let profiled = profile(&ProfileRequest {
        program: &req.program,
        spec: &req.spec,
        spec_path: &req.spec_path,
        include_dirs: req.include_dirs.clone(),
        cc: req.cc.as_deref(),
        plain_runs: req.plain_runs,
        work,
    })?;
    let p = &profiled.summary;
    progress.note(&format!(
        "{} runs in {:.3} s (median of {}); {} calls of {} hold {:.1}% of a profiled run (median of {}): no tuning of {} can make it more than {:.2}x faster",
        req.program.name(),
        p.plain_median_s,
        p.plain_runs_s.len(),
        p.calls,
        req.spec.routine.name.name,
        p.share * 100.0,
        p.profiled_shares.len().max(1),
        req.spec.routine.name.name,
        p.amdahl_bound
    ));
    Ok(profiled)
}

/// Step 2: the heaviest contexts up to the cover asked for.
fn choose_contexts(
    req: &AutotuneRequest,
    profiled: &Profiled,
    progress: &mut dyn Progress,
) -> Choice {
    let choice = choose(&profiled.contexts, &req.cover);
    for rank in &choice.ranks {
        let c = context(&profiled.contexts, *rank);
        progress.note(&format!(
            "context {}: {} calls, {} per call, {:.1}% of the routine's time",
            profiled.label(*rank),
            c.calls,
            stats::ns(c.in_app_median_ns),
            100.0 * crate::choose::weight(c) / total_weight(&profiled.contexts)
        ));
    }
    if choice.short_of_cover {
        progress.note(&format!(
            "the {} heaviest contexts hold {:.1}% of the routine's time, short of --cover {:.0}%: raise --max-contexts to tune more",
            choice.ranks.len(),
            choice.share * 100.0,
            req.cover.share * 100.0
        ));
    }
    choice
}

/// Step 3: a target for each context of `ranks`, and the contexts none
/// reproduces named.
fn target_contexts(
    req: &AutotuneRequest,
    work: &Path,
    profiled: &Profiled,
    ranks: &[usize],
    progress: &mut dyn Progress,
) -> Result<Vec<ContextTarget>, AutotuneError> {
    let p = &profiled.summary;
    let profiled_spec = spec_lang::load(&p.profiled_spec, &[])
        .map_err(|d| AutotuneError::Profile(format!("the profiled spec does not load: {d}")))?;
    let targets = find_targets(
        &TargetRequest {
            program: &req.program,
            profiled,
            spec: &profiled_spec,
            spec_path: &p.profiled_spec,
            include_dirs: req.include_dirs.clone(),
            base: req.driver.clone(),
            rules: req.fidelity,
            checkpoints: req.checkpoints,
            work,
        },
        ranks,
        &mut |line| progress.note(line),
    )?;
    for t in targets.iter().filter(|t| t.target.is_none()) {
        progress.note(&format!(
            "context {} is left out of the tuning and the prediction: {}",
            t.label,
            t.rejected.join("; ")
        ));
    }
    Ok(targets)
}

fn context(file: &ContextsFile, rank: usize) -> &ContextEntry {
    file.contexts
        .iter()
        .find(|c| c.rank == rank)
        .expect("a chosen rank is in the file")
}

fn total_weight(file: &ContextsFile) -> f64 {
    file.contexts
        .iter()
        .map(crate::choose::weight)
        .sum::<f64>()
        .max(f64::MIN_POSITIVE)
}

/// A contexts file of `chosen`, each with what it is tuned on; a resumed
/// run keeps the one its searches' campaigns were started with.
fn write_contexts(
    all: &ContextsFile,
    chosen: &[&ContextTarget],
    path: &Path,
    resume: bool,
) -> Result<(), AutotuneError> {
    if resume && path.is_file() {
        return Ok(());
    }
    let mut file = all.clone();
    file.contexts = chosen
        .iter()
        .map(|t| {
            let mut c = all
                .contexts
                .iter()
                .find(|c| c.rank == t.rank)
                .expect("a chosen rank is in the file")
                .clone();
            match &t.target {
                Some(Target::Driver { state, .. }) => c.cache = Some(*state),
                Some(Target::Checkpoint { image, .. }) => c.image = Some(image.clone()),
                None => {}
            }
            c.fidelity = t.fidelity.map(|f| f.ratio);
            c
        })
        .collect();
    fsguard::write_atomic(path, file.to_json().as_bytes())?;
    Ok(())
}

/// Every search's finalists, the joint search's first, re-timed once side
/// by side (and beside the original, when the drivers have it).
struct Finalists {
    configs: Vec<Config>,
    /// How many of `configs`, from the first, are the joint search's.
    joint_candidates: usize,
    /// rounds x configs (and the original, last) x contexts
    times: Retimed,
}

fn retime_finalists(
    t: &Tuning,
    searcher: &mut dyn Searcher,
    searched: &Searched,
) -> Result<Finalists, AutotuneError> {
    let mut configs = candidates(&searched.searches[0]);
    let joint_candidates = configs.len();
    for c in searched.searches[1..].iter().flat_map(candidates) {
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    let rounds = if configs.len() > 1 || t.original.is_some() {
        t.req.retime_rounds.max(6)
    } else {
        t.req.retime_rounds.max(1)
    };
    let times = searcher.retime(&RetimeTask {
        spec: &t.profile.profiled_spec,
        contexts_file: t.all_file,
        configs: &configs,
        original: t.original,
        rounds,
    })?;
    Ok(Finalists {
        configs,
        joint_candidates,
        times,
    })
}

/// Step 4's choice: every search's finalists re-timed side by side with
/// the original. The configuration over all contexts is the joint search's
/// finalist of least predicted time in the routine; a context with a search
/// of its own keeps its finalist of least predicted time there only where
/// that is proven faster there than the shared one. Each search's record
/// takes the choice made from its finalists.
fn decide(
    t: &Tuning,
    searcher: &mut dyn Searcher,
    searched: &mut Searched,
    progress: &mut dyn Progress,
) -> Result<Vec<ContextChoice>, AutotuneError> {
    let Finalists {
        configs,
        joint_candidates,
        times,
    } = retime_finalists(t, searcher, searched)?;
    let index = |c: &Config| configs.iter().position(|x| x == c).expect("listed");
    let with_original = t.original.is_some();
    let per_call =
        |config: usize, k: usize| predicted_in_app(t.faithful[k], &times, config, k, with_original);
    let joint = JointChoice::of(t.faithful, &times, joint_candidates, with_original);
    if joint_candidates > 1 {
        progress.note(&format!(
            "over all contexts, re-timed against the original: {}",
            joint.text(&configs)
        ));
    }
    let record = &mut searched.searches[0];
    record.best = configs[joint.index].clone();
    record.tied = joint.tied.iter().map(|&i| configs[i].clone()).collect();
    record.best_ns = joint.in_routine_ns[joint.index];
    // Each context's own search's choice, where it had one.
    let own: Vec<Option<usize>> = (0..t.faithful.len())
        .map(|k| {
            let search = searched.own_search[k]?;
            let own = candidates(&searched.searches[search])
                .iter()
                .map(index)
                .min_by(|&a, &b| per_call(a, k).total_cmp(&per_call(b, k)))?;
            let record = &mut searched.searches[search];
            record.best = configs[own].clone();
            record.best_ns = t.faithful[k].calls as f64 * per_call(own, k);
            Some(own)
        })
        .collect();
    let series = |config: usize, context: usize| -> Vec<f64> {
        times.iter().map(|r| r[config][context]).collect()
    };
    let mut choices = Vec::new();
    for (k, target) in t.faithful.iter().enumerate() {
        let (config, specialised, over_joint) = match own[k].filter(|&o| o != joint.index) {
            None => (joint.index, false, None),
            Some(own) => {
                let s = side_by_side(&series(joint.index, k), &series(own, k));
                let pays = s.is_some_and(|s| s.low > 1.0);
                progress.note(&format!(
                    "context {}: its own {} against the shared {}: {}{}",
                    target.label,
                    configs[own],
                    configs[joint.index],
                    s.map_or("undecided".into(), |s| s.text()),
                    if pays {
                        ", kept"
                    } else {
                        ", the shared one is kept"
                    }
                ));
                (if pays { own } else { joint.index }, pays, s)
            }
        };
        choices.push(ContextChoice {
            rank: target.rank,
            label: target.label.clone(),
            config: configs[config].clone(),
            specialised,
            original_ns: target.in_app_ns,
            chosen_ns: per_call(config, k),
            specialised_over_joint: over_joint,
        });
    }
    Ok(choices)
}

/// The configuration over all contexts, chosen from the first
/// `candidates` of a re-timing by the program's predicted time in the
/// routine (calls x time per call, summed over the contexts), per round.
struct JointChoice {
    index: usize,
    /// The candidates the rounds could not tell from it at 95 %.
    tied: Vec<usize>,
    /// Each candidate's median predicted time in the routine, ns.
    in_routine_ns: Vec<f64>,
}

impl JointChoice {
    fn of(
        faithful: &[&ContextTarget],
        times: &Retimed,
        candidates: usize,
        with_original: bool,
    ) -> JointChoice {
        let per_round: Vec<Vec<f64>> = (0..candidates)
            .map(|c| {
                times
                    .iter()
                    .map(|r| {
                        faithful
                            .iter()
                            .enumerate()
                            .map(|(k, t)| {
                                t.calls as f64 * per_call_in_round(t, r, c, k, with_original)
                            })
                            .sum()
                    })
                    .collect()
            })
            .collect();
        let in_routine_ns: Vec<f64> = per_round
            .iter()
            .map(|v| stats::Summary::of(v).map_or(f64::INFINITY, |s| s.median))
            .collect();
        let index = (0..candidates)
            .min_by(|&a, &b| in_routine_ns[a].total_cmp(&in_routine_ns[b]))
            .unwrap_or(0);
        let tied = (0..candidates)
            .filter(|&c| c != index)
            .filter(|&c| {
                side_by_side(&per_round[index], &per_round[c]).is_none_or(|s| s.high >= 1.0)
            })
            .collect();
        JointChoice {
            index,
            tied,
            in_routine_ns,
        }
    }

    /// Each candidate's predicted time in the routine, the chosen and the
    /// tied marked.
    fn text(&self, configs: &[Config]) -> String {
        self.in_routine_ns
            .iter()
            .enumerate()
            .map(|(c, ns)| {
                let mark = if c == self.index {
                    " (chosen)"
                } else if self.tied.contains(&c) {
                    " (tied)"
                } else {
                    ""
                };
                format!("{} {}{mark}", configs[c], stats::ns(*ns))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The speedup of `after` over `before`, timed side by side round by
/// round, with its 95 % interval.
fn side_by_side(before: &[f64], after: &[f64]) -> Option<Speedup> {
    let rounds: Vec<Round> = before
        .iter()
        .zip(after)
        .map(|(a, b)| Round {
            order: Order::PlainFirst,
            plain_s: *a,
            tuned_s: *b,
        })
        .collect();
    Speedup::of(&rounds, 0.95)
}

/// The program's predicted time per call of context `k` (target `t`)
/// with configuration `config` of `times` (rounds x configurations x
/// contexts). With the original re-timed in the same rounds (last in each),
/// the in-app time scaled by the median of the rounds' ratios, tuned over
/// original side by side on the same target: the host's speed at the
/// profile and during the re-timing drops out, as does the target's
/// offset from the program. Without it, the re-timed time itself
/// (already divided by the target's fidelity ratio).
fn predicted_in_app(
    t: &ContextTarget,
    times: &[Vec<Vec<f64>>],
    config: usize,
    k: usize,
    with_original: bool,
) -> f64 {
    let per_round: Vec<f64> = times
        .iter()
        .map(|r| per_call_in_round(t, r, config, k, with_original))
        .collect();
    stats::Summary::of(&per_round).map_or(f64::NAN, |s| s.median)
}

/// [`predicted_in_app`] from one round alone: the in-app time scaled by
/// the round's ratio to the original, or the round's time itself.
fn per_call_in_round(
    t: &ContextTarget,
    round: &[Vec<f64>],
    config: usize,
    k: usize,
    with_original: bool,
) -> f64 {
    if with_original {
        t.in_app_ns * round[config][k] / round[round.len() - 1][k]
    } else {
        round[config][k]
    }
}

/// The program's time with each tuned context at its chosen time per call.
/// What the tuned calls save is a share of the profiled run, whose routine
/// time and wall time were measured together: the predicted speedup is
/// 1 / (1 - saved / that run), and the program's predicted time that
/// speedup applied to the plain median.
fn predict(
    p: &ProgramProfile,
    contexts: &ContextsFile,
    faithful: &[&ContextTarget],
    choices: &[ContextChoice],
) -> Prediction {
    let saved_ns: f64 = faithful
        .iter()
        .zip(choices)
        .map(|(t, c)| t.calls as f64 * (c.original_ns - c.chosen_ns))
        .sum();
    let saved_share = (saved_ns * 1e-9 / p.profiled_wall_s).min(1.0 - 1e-9);
    let speedup = 1.0 / (1.0 - saved_share);
    let tuned: f64 = faithful
        .iter()
        .map(|t| crate::choose::weight(context(contexts, t.rank)))
        .sum();
    Prediction {
        program_s: p.plain_median_s / speedup,
        speedup,
        tuned_share: tuned / total_weight(contexts),
    }
}

fn deploy_choices(
    req: &AutotuneRequest,
    dir: &Path,
    choices: &[ContextChoice],
    faithful: &[&ContextTarget],
) -> Result<Deployment, AutotuneError> {
    let mut variants: Vec<Config> = Vec::new();
    for c in choices {
        if !variants.contains(&c.config) {
            variants.push(c.config.clone());
        }
    }
    let routes = choices
        .iter()
        .zip(faithful)
        .map(|(c, t)| DispatchRoute {
            values: t.values.clone(),
            variant: variants
                .iter()
                .position(|v| *v == c.config)
                .expect("listed"),
            label: format!("{} -> {}", t.label, c.config),
        })
        .collect();
    let builds = variants
        .iter()
        .map(|v| {
            let mut defines = Vec::new();
            let mut team = None;
            v.apply(&mut defines, &mut team);
            VariantBuild {
                label: v.to_string(),
                defines,
                code_offset: deployed_offset(req, v),
            }
        })
        .collect();
    let deployed = deploy(
        dir,
        &DeployRequest {
            spec: &req.spec,
            include_dirs: req.include_dirs.clone(),
            implementation: req.implementation.clone(),
            extra: req.extra.clone(),
            cc: req.cc.clone(),
            cflags: req.cflags.clone(),
            variants: builds,
            routes,
        },
    )?;
    let misplaced = deployed
        .placements
        .iter()
        .filter(|p| !p.as_timed())
        .map(|p| match p.placed_at {
            Some(at) => format!(
                "{}: its code starts {at} bytes past a page, timed at {}",
                p.label, p.timed_at
            ),
            None => format!("{}: not in the library's symbol table", p.label),
        })
        .collect();
    Ok(Deployment {
        dir: dir.to_path_buf(),
        preload_library: deployed.preload_library,
        wrap_archive: deployed.wrap_archive,
        symbol: deployed.symbol,
        variants,
        misplaced,
    })
}

/// The positions a routine's code is tried at: the four 16-byte steps of
/// the 64-byte fetch block that `base` (the spec's code offset) is in;
/// gcc and clang start functions on 16 bytes.
fn placements(base: u32) -> Vec<u32> {
    let block = base - base % 64;
    (0..4)
        .map(|k| block + 16 * k)
        .filter(|o| *o != base)
        .collect()
}

/// What the placement step re-times on.
struct PlaceRequest<'a> {
    spec: &'a Path,
    contexts_file: &'a Path,
    /// The C calling the program's own definition, re-timed beside.
    original: Option<&'a Path>,
    /// Where the drivers placed the candidate's code during the search.
    base: u32,
    rounds: usize,
}

/// Each chosen configuration re-timed side by side with its code at the
/// other positions of its fetch block ([`placements`]), together with the
/// configurations its search could not tell from it (timed at one
/// position they tie; where their code falls can part them), in every
/// context it was chosen for. A (configuration, position) pair replaces
/// the chosen one only where proven faster than it at the search's
/// position (the interval of the rounds' summed time above 1): the
/// deployment places the code where it was timed. Not tried when the
/// search already searched `code_offset`, or when a target is a
/// checkpoint (a restored copy's code is where its loader put it).
fn place(
    req: &PlaceRequest,
    searcher: &mut dyn Searcher,
    faithful: &[&ContextTarget],
    mut choices: Vec<ContextChoice>,
    searches: &[SearchRecord],
    progress: &mut dyn Progress,
) -> Result<Vec<ContextChoice>, AutotuneError> {
    if choices.iter().any(|c| c.config.code_offset().is_some()) {
        return Ok(choices);
    }
    if faithful
        .iter()
        .any(|t| matches!(t.target, Some(Target::Checkpoint { .. })))
    {
        progress
            .note("code placement: not tried (a restored copy's code is where its loader put it)");
        return Ok(choices);
    }
    let Contenders {
        distinct,
        configs,
        groups,
    } = contenders(&choices, searches, req.base);
    // rounds x configs (then the original) x contexts
    let times = searcher.retime(&RetimeTask {
        spec: req.spec,
        contexts_file: req.contexts_file,
        configs: &configs,
        original: req.original,
        rounds: req.rounds.max(6),
    })?;
    for (c, group) in distinct.iter().zip(&groups) {
        let users: Vec<usize> = (0..choices.len())
            .filter(|k| choices[*k].config == *c)
            .collect();
        let Some((i, s)) = best_placed(&times, faithful, &users, group) else {
            continue;
        };
        let kept = s.low > 1.0;
        progress.note(&format!(
            "code placement of {c} (at {} bytes past a page): best of {} others tried, {}{}, {} against it{}",
            req.base,
            group.len() - 1,
            configs[i],
            if configs[i].code_offset().is_none() {
                format!(" at {}", req.base)
            } else {
                String::new()
            },
            s.text(),
            if kept { ", kept" } else { "; it is kept" }
        ));
        if kept {
            for k in users {
                choices[k].config = configs[i].clone();
                choices[k].chosen_ns =
                    predicted_in_app(faithful[k], &times, i, k, req.original.is_some());
            }
        }
    }
    Ok(choices)
}

/// What the placement step re-times.
struct Contenders {
    /// The chosen configurations, each once.
    distinct: Vec<Config>,
    /// Every (configuration, position) pair re-timed.
    configs: Vec<Config>,
    /// Per distinct configuration, the indices into `configs` of its
    /// contenders; the first is the configuration itself, unmoved.
    groups: Vec<Vec<usize>>,
}

/// Each chosen configuration and the configurations tied with it, at the
/// search's position and at every other one of [`placements`].
fn contenders(choices: &[ContextChoice], searches: &[SearchRecord], base: u32) -> Contenders {
    let mut distinct: Vec<Config> = Vec::new();
    for c in choices {
        if !distinct.contains(&c.config) {
            distinct.push(c.config.clone());
        }
    }
    let mut configs: Vec<Config> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for c in &distinct {
        let mut group = Vec::new();
        for contender in std::iter::once(c.clone()).chain(tied_with(c, searches)) {
            group.push(configs.len());
            configs.push(contender.clone());
            for o in placements(base) {
                let mut placed = contender.clone();
                placed.set(
                    config::Setting::new(config::CODE_OFFSET, i64::from(o))
                        .expect("an offset within a page"),
                );
                group.push(configs.len());
                configs.push(placed);
            }
        }
        groups.push(group);
    }
    Contenders {
        distinct,
        configs,
        groups,
    }
}

/// Of `group`'s contenders after its first (the chosen configuration as
/// the search placed it), the one with the highest median speedup over
/// the first, on the program's time in the contexts `users` per round
/// (calls x time per call), with that speedup.
fn best_placed(
    times: &Retimed,
    faithful: &[&ContextTarget],
    users: &[usize],
    group: &[usize],
) -> Option<(usize, Speedup)> {
    let total = |i: usize| -> Vec<f64> {
        times
            .iter()
            .map(|r| {
                users
                    .iter()
                    .map(|k| faithful[*k].calls as f64 * r[i][*k])
                    .sum()
            })
            .collect()
    };
    let as_chosen = total(group[0]);
    group[1..]
        .iter()
        .filter_map(|&i| side_by_side(&as_chosen, &total(i)).map(|s| (i, s)))
        .max_by(|a, b| a.1.median.total_cmp(&b.1.median))
}

/// The configurations the searches that chose `chosen` could not tell
/// from it (at most two: each costs a re-timing at every position).
fn tied_with(chosen: &Config, searches: &[SearchRecord]) -> Vec<Config> {
    let mut tied: Vec<Config> = Vec::new();
    for t in searches
        .iter()
        .filter(|s| s.best == *chosen)
        .flat_map(|s| &s.tied)
    {
        if t != chosen && !tied.contains(t) && tied.len() < 2 {
            tied.push(t.clone());
        }
    }
    tied
}

/// Where a variant's code is placed: its configuration's code offset,
/// else where the drivers placed the candidate (the spec's, else 0).
fn deployed_offset(req: &AutotuneRequest, config: &Config) -> u32 {
    config.code_offset().unwrap_or_else(|| {
        req.spec
            .timer
            .as_ref()
            .and_then(|t| t.code_offset)
            .map_or(0, |o| o.get())
    })
}

/// Wall time per step.
struct StepTimer {
    since: Instant,
    laps: Vec<(String, f64)>,
}

impl StepTimer {
    fn new() -> StepTimer {
        StepTimer {
            since: Instant::now(),
            laps: Vec::new(),
        }
    }

    fn lap(&mut self, step: &str) {
        self.laps
            .push((step.to_string(), self.since.elapsed().as_secs_f64()));
        self.since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fidelity::CacheState;
    use std::collections::BTreeMap;

    #[test]
    fn code_is_tried_at_the_other_16_byte_steps_of_its_fetch_block() {
        assert_eq!(placements(0), [16, 32, 48]);
        assert_eq!(placements(1616), [1600, 1632, 1648]);
        assert_eq!(placements(4080), [4032, 4048, 4064]);
    }

    const MEDIAN_DRIFT: f64 = 1.0 + 0.3;

    /// Re-times each configuration at `time(config)` per call, every
    /// configuration of a round moved alike by the round's drift.
    struct Placed<F: Fn(&Config) -> f64> {
        time: F,
        asked: Vec<Config>,
    }

    impl<F: Fn(&Config) -> f64> Searcher for Placed<F> {
        fn search(&mut self, _: &SearchTask) -> Result<SearchRecord, AutotuneError> {
            unreachable!("placement only re-times")
        }

        fn retime(&mut self, task: &RetimeTask) -> Result<Retimed, AutotuneError> {
            self.asked = task.configs.to_vec();
            Ok((0..task.rounds)
                .map(|r| {
                    let drift = 1.0 + 0.3 * (r % 3) as f64;
                    task.configs
                        .iter()
                        .map(|c| vec![drift * (self.time)(c); 2])
                        .collect()
                })
                .collect())
        }
    }

    struct Said(Vec<String>);

    impl Progress for Said {
        fn step(&mut self, _: usize, _: &str) {}
        fn note(&mut self, line: &str) {
            self.0.push(line.to_string());
        }
    }

    fn config(nu: i64, offset: Option<i64>) -> Config {
        let mut c = Config::from_pairs([("NU", nu)]).unwrap();
        if let Some(o) = offset {
            c.set(config::Setting::new(config::CODE_OFFSET, o).unwrap());
        }
        c
    }

    fn target(rank: usize, kind: Target) -> ContextTarget {
        ContextTarget {
            rank,
            label: format!("n={rank}"),
            values: BTreeMap::from([("n".to_string(), rank as i64)]),
            calls: 10,
            in_app_ns: 1000.0,
            share: 0.5,
            target: Some(kind),
            fidelity: None,
            rejected: Vec::new(),
        }
    }

    fn driver() -> Target {
        Target::Driver {
            state: CacheState::Warm,
            defines: BTreeMap::new(),
        }
    }

    fn chosen(rank: usize, config: &Config) -> ContextChoice {
        ContextChoice {
            rank,
            label: format!("n={rank}"),
            config: config.clone(),
            specialised: false,
            original_ns: 1000.0,
            chosen_ns: 500.0,
            specialised_over_joint: None,
        }
    }

    fn searched(best: &Config, tied: &[Config]) -> SearchRecord {
        SearchRecord {
            over: "all contexts".into(),
            best: best.clone(),
            tied: tied.to_vec(),
            finalists: Vec::new(),
            best_ns: 500.0,
            evaluations: 10,
            seconds: 1.0,
            log: PathBuf::from("all.tune.jsonl"),
            campaign: None,
        }
    }

    fn run_place<F: Fn(&Config) -> f64>(
        time: F,
        kinds: [Target; 2],
        searches: &[SearchRecord],
    ) -> (Vec<ContextChoice>, Vec<Config>, Vec<String>) {
        let targets: Vec<ContextTarget> = kinds
            .into_iter()
            .enumerate()
            .map(|(k, t)| target(k + 1, t))
            .collect();
        let faithful: Vec<&ContextTarget> = targets.iter().collect();
        let joint = &searches[0].best;
        let choices = vec![chosen(1, joint), chosen(2, joint)];
        let mut searcher = Placed {
            time,
            asked: Vec::new(),
        };
        let mut said = Said(Vec::new());
        let request = PlaceRequest {
            spec: Path::new("r.spec"),
            contexts_file: Path::new("targets.contexts.json"),
            original: None,
            base: 0,
            rounds: 6,
        };
        let placed = place(
            &request,
            &mut searcher,
            &faithful,
            choices,
            searches,
            &mut said,
        )
        .unwrap();
        (placed, searcher.asked, said.0)
    }

    #[test]
    fn the_joint_configuration_is_the_finalist_the_original_says_is_fastest() {
        // The search's order was A, B, C (A timed fast once); side by side
        // with the original, B is 0.8x of it, C as fast within the rounds'
        // spread, A 1.2x, every round moved alike by the host's drift.
        let targets = [target(1, driver()), target(2, driver())];
        let faithful: Vec<&ContextTarget> = targets.iter().collect();
        let times: Retimed = (0..6)
            .map(|r| {
                let drift = 1.0 + 0.3 * (r % 3) as f64;
                let c = if r % 2 == 0 { 0.78 } else { 0.83 };
                [1.2, 0.8, c, 1.0]
                    .iter()
                    .map(|x| vec![drift * x * 1000.0; 2])
                    .collect()
            })
            .collect();
        let joint = JointChoice::of(&faithful, &times, 3, true);
        assert_eq!((joint.index, joint.tied.clone()), (1, vec![2]));
        // Two contexts of 10 calls at 1000 ns in the program, 0.8x.
        assert!((joint.in_routine_ns[1] - 16_000.0).abs() < 1e-6);
        let names = [config(8, None), config(4, None), config(2, None)];
        assert_eq!(
            joint.text(&names),
            "NU=8 24.00 us; NU=4 16.00 us (chosen); NU=2 16.10 us (tied)"
        );
    }

    #[test]
    fn a_position_proven_faster_is_deployed_with_its_own_prediction() {
        let chosen = config(8, None);
        let (placed, asked, said) = run_place(
            |c| {
                if c.code_offset() == Some(32) {
                    600.0
                } else {
                    1000.0
                }
            },
            [driver(), driver()],
            &[searched(&chosen, &[])],
        );
        // The chosen configuration and its three other positions.
        assert_eq!(asked.len(), 4, "{asked:?}");
        for c in &placed {
            assert_eq!(c.config, config(8, Some(32)), "{said:?}");
            // The median round's time (no original re-timed beside).
            assert_eq!(c.chosen_ns, 600.0 * MEDIAN_DRIFT);
        }
        assert!(said[0].contains("kept"), "{said:?}");
    }

    #[test]
    fn a_tied_configuration_placed_better_replaces_the_searchs_best() {
        let (best, tied) = (config(8, None), config(16, None));
        let (placed, asked, said) = run_place(
            |c| match (c.get("NU"), c.code_offset()) {
                (Some(16), Some(48)) => 400.0,
                (Some(8), Some(32)) => 700.0,
                _ => 1000.0,
            },
            [driver(), driver()],
            &[searched(&best, std::slice::from_ref(&tied))],
        );
        assert_eq!(
            asked.len(),
            8,
            "two contenders at four positions: {asked:?}"
        );
        assert!(
            asked.contains(&tied),
            "the tied one at the search's position too"
        );
        for c in &placed {
            assert_eq!(c.config, config(16, Some(48)), "{said:?}");
            assert_eq!(c.chosen_ns, 400.0 * MEDIAN_DRIFT);
        }
    }

    #[test]
    fn without_a_proven_gain_the_choice_is_left_as_searched() {
        let chosen = config(8, None);
        let (placed, _, said) = run_place(
            |_| 1000.0,
            [driver(), driver()],
            &[searched(&chosen, &[config(4, None)])],
        );
        for c in &placed {
            assert_eq!((&c.config, c.chosen_ns), (&chosen, 500.0), "{said:?}");
        }
        assert!(said[0].ends_with("it is kept"), "{said:?}");
    }

    #[test]
    fn a_checkpoint_target_is_not_placed_and_says_so() {
        let chosen = config(8, None);
        let image = Target::Checkpoint {
            image: PathBuf::from("img"),
            call: 3,
            delay: 1,
        };
        let (placed, asked, said) =
            run_place(|_| 1.0, [driver(), image], &[searched(&chosen, &[])]);
        assert!(asked.is_empty());
        assert!(placed.iter().all(|c| c.config == chosen));
        assert!(said[0].contains("not tried"), "{said:?}");
    }
}
