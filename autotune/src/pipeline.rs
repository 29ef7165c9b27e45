//! `tdg autotune`, step by step: profile the program, choose the contexts
//! that hold its time in the routine, find a faithful target for each,
//! search the candidate on the program's predicted time (once over all
//! contexts, then per context), keep a context's own configuration only
//! where re-timing shows it beats the shared one, deploy, and prove the
//! gain with whole-program runs. The searches themselves are `tdg tune`'s
//! ([`Searcher`]): the same strategies, campaigns, executors and logs.

use crate::choose::{choose, Cover};
use crate::deploy::{deploy, DeployRequest, VariantBuild, DEPLOY_DIR};
use crate::fidelity::FidelityRules;
use crate::profile::{profile, ProfileRequest, ProgramProfile};
use crate::program::{Launch, Program};
use crate::proof::{prove, ProofError, ProofRules, ProofVerdict, Side, Speedup};
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
}

/// The searches and the re-timing, done with `tdg tune`'s machinery and
/// the user's search options.
pub trait Searcher {
    fn search(&mut self, task: &SearchTask) -> Result<SearchRecord, AutotuneError>;

    /// `configs` timed again side by side in every context of
    /// `contexts_file`, `rounds` times over: per round, per configuration,
    /// each context's predicted time per call; with `original` (the C that
    /// calls the program's own definition), the original routine on the
    /// same targets in the same rounds, last in each round. One objective
    /// serves every round (a checkpoint's image is opened once).
    fn retime(
        &mut self,
        spec: &Path,
        contexts_file: &Path,
        configs: &[Config],
        original: Option<&Path>,
        rounds: usize,
    ) -> Result<Vec<Vec<Vec<f64>>>, AutotuneError>;
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

pub fn autotune(
    req: &AutotuneRequest,
    searcher: &mut dyn Searcher,
    progress: &mut dyn Progress,
) -> Result<Record, AutotuneError> {
    let mut timer = StepTimer::new();
    let dir = fsguard::OwnedDir::open(&req.dir, DEPLOY_DIR)?;
    let work = fsguard::OwnedDir::open(&dir.path().join("work"), DEPLOY_DIR)?;
    let work = work.path();
    let inputs = input_digests(req)?;
    let state = work.join(MEASURED_FILE);
    let measured = match (req.resume, std::fs::read_to_string(&state)) {
        (true, Ok(text)) => {
            let m: Measured = serde_json::from_str(&text)
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
            progress.note(&format!(
                "resuming {}: the profile and the targets measured before, each search from its campaign",
                dir.path().display()
            ));
            m
        }
        _ => {
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
            let m = measure(req, work, inputs, progress, &mut timer)?;
            fsguard::write_atomic(
                &state,
                serde_json::to_string_pretty(&m)
                    .expect("plain data")
                    .as_bytes(),
            )?;
            m
        }
    };
    let contexts = ContextsFile::load(&measured.profile.contexts_file)
        .map_err(|e| AutotuneError::Profile(e.to_string()))?;
    let p = &measured.profile;
    let targets = &measured.targets;
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
    let all_file = work.join("targets.contexts.json");
    write_contexts(&contexts, &faithful, &all_file, req.resume)?;

    progress.step(4, "tune on the program's time");
    let mut searches = vec![searcher.search(&SearchTask {
        spec: &p.profiled_spec,
        contexts_file: &all_file,
        contexts: faithful.len(),
        campaign: &work.join("all.campaign"),
        log: &work.join("all.tune.jsonl"),
        over: "all contexts".into(),
    })?];
    let joint = searches[0].best.clone();
    progress.note(&format!("over all contexts: {}", joint));
    let mut own_best: Vec<Config> = vec![joint.clone(); faithful.len()];
    if req.specialise && faithful.len() > 1 {
        for (i, t) in faithful.iter().enumerate() {
            let file = work.join(format!("context-{}.contexts.json", t.rank));
            write_contexts(&contexts, &[*t], &file, req.resume)?;
            let s = searcher.search(&SearchTask {
                spec: &p.profiled_spec,
                contexts_file: &file,
                contexts: 1,
                campaign: &work.join(format!("context-{}.campaign", t.rank)),
                log: &work.join(format!("context-{}.tune.jsonl", t.rank)),
                over: t.label.clone(),
            })?;
            progress.note(&format!("context {}: {}", t.label, s.best));
            own_best[i] = s.best.clone();
            searches.push(s);
        }
    }
    // The original as the drivers time it, beside every re-timed
    // configuration (targets.rs writes it where a driver was tried).
    let original = Some(work.join(crate::targets::ORIGINAL_SOURCE)).filter(|p| p.is_file());
    let choices = decide(
        req,
        searcher,
        &p.profiled_spec,
        &all_file,
        &faithful,
        &joint,
        &own_best,
        original.as_deref(),
        progress,
    )?;
    let choices = if req.place {
        place(
            &PlaceRequest {
                spec: &p.profiled_spec,
                contexts_file: &all_file,
                original: original.as_deref(),
                base: deployed_offset(req, &Config::new()),
                rounds: req.retime_rounds,
            },
            searcher,
            &faithful,
            choices,
            &searches,
            progress,
        )?
    } else {
        choices
    };
    let prediction = predict(p, &contexts, &faithful, &choices);
    progress.note(&format!(
        "predicted: {:.3} s, {:.3}x faster (Amdahl bound {:.2}x)",
        prediction.program_s, prediction.speedup, p.amdahl_bound
    ));
    timer.lap("tune");

    progress.step(5, "deploy");
    let deployment = deploy_choices(req, dir.path(), &choices, &faithful)?;
    progress.note(&format!(
        "{}: {} configuration(s) behind a dispatcher on the contexts' values; `tdg autotune exec {} -- PROGRAM` runs a command with it",
        deployment.preload_library.display(),
        deployment.variants.len(),
        dir.path().display()
    ));
    for m in &deployment.misplaced {
        progress.note(&format!(
            "warning: {m}; the measured gain may differ from the predicted one"
        ));
    }
    timer.lap("deploy");

    progress.step(6, "prove it in the program");
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
    let proof = match proved {
        Ok(p) => p,
        Err(e @ (ProofError::OutputChanged { .. } | ProofError::TunedFailed { .. })) => {
            // Nobody should run a deployment that breaks the program.
            let _ = std::fs::remove_file(&deployment.preload_library);
            let _ = std::fs::remove_file(&deployment.wrap_archive);
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    timer.lap("prove");

    progress.step(7, "record");
    let outcome = if proof.verdict == ProofVerdict::Faster {
        Outcome::Faster
    } else {
        Outcome::NotFaster
    };
    let record = Record {
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
        profile: measured.profile.clone(),
        cover_asked: req.cover.share,
        cover_reached: measured.cover_reached,
        contexts: targets.clone(),
        searches,
        choices,
        prediction,
        deployment,
        proof,
        outcome,
        step_seconds: timer.laps,
    };
    record.write(dir.path())?;
    crate::readme::write(dir.path(), &record)?;
    Ok(record)
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
    timer.lap("profile");

    progress.step(2, "choose the contexts");
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
    timer.lap("choose");

    progress.step(3, "a faithful target for each context");
    let profiled_spec = spec_lang::load(&p.profiled_spec, &[])
        .map_err(|d| AutotuneError::Profile(format!("the profiled spec does not load: {d}")))?;
    let targets = find_targets(
        &TargetRequest {
            program: &req.program,
            profiled: &profiled,
            spec: &profiled_spec,
            spec_path: &p.profiled_spec,
            include_dirs: req.include_dirs.clone(),
            base: req.driver.clone(),
            rules: req.fidelity,
            checkpoints: req.checkpoints,
            work,
        },
        &choice.ranks,
        &mut |line| progress.note(line),
    )?;
    for t in targets.iter().filter(|t| t.target.is_none()) {
        progress.note(&format!(
            "context {} is left out of the tuning and the prediction: {}",
            t.label,
            t.rejected.join("; ")
        ));
    }
    timer.lap("targets");
    Ok(Measured {
        version: MEASURED_VERSION,
        inputs,
        profile: profiled.summary.clone(),
        cover_reached: choice.share,
        targets,
    })
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

/// Each context's configuration: its own best where side-by-side
/// re-timing shows it faster than the shared one beyond the rounds'
/// spread, else the shared one.
#[allow(clippy::too_many_arguments)]
fn decide(
    req: &AutotuneRequest,
    searcher: &mut dyn Searcher,
    spec: &Path,
    all_file: &Path,
    faithful: &[&ContextTarget],
    joint: &Config,
    own_best: &[Config],
    original: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<Vec<ContextChoice>, AutotuneError> {
    let mut configs: Vec<Config> = vec![joint.clone()];
    for c in own_best {
        if !configs.contains(c) {
            configs.push(c.clone());
        }
    }
    let index = |c: &Config| configs.iter().position(|x| x == c).expect("listed");
    let rounds = if configs.len() > 1 || original.is_some() {
        req.retime_rounds.max(6)
    } else {
        req.retime_rounds.max(1)
    };
    // rounds x configs (and the original, last) x contexts
    let times = searcher.retime(spec, all_file, &configs, original, rounds)?;
    let series = |config: usize, context: usize| -> Vec<f64> {
        times.iter().map(|r| r[config][context]).collect()
    };
    let mut choices = Vec::new();
    for (k, t) in faithful.iter().enumerate() {
        let j = series(0, k);
        let own = index(&own_best[k]);
        let (config, specialised, over_joint) = if own == 0 {
            (joint.clone(), false, None)
        } else {
            let o = series(own, k);
            let rounds: Vec<crate::proof::Round> = j
                .iter()
                .zip(&o)
                .map(|(a, b)| crate::proof::Round {
                    order: crate::proof::Order::PlainFirst,
                    plain_s: *a,
                    tuned_s: *b,
                })
                .collect();
            let s = Speedup::of(&rounds, 0.95);
            let pays = s.is_some_and(|s| s.low > 1.0);
            progress.note(&format!(
                "context {}: its own {} against the shared {}: {}{}",
                t.label,
                own_best[k],
                joint,
                s.map_or("undecided".into(), |s| s.text()),
                if pays {
                    ", kept"
                } else {
                    ", the shared one is kept"
                }
            ));
            if pays {
                (own_best[k].clone(), true, s)
            } else {
                (joint.clone(), false, s)
            }
        };
        let chosen_ns = predicted_in_app(t, &times, index(&config), k, original.is_some());
        choices.push(ContextChoice {
            rank: t.rank,
            label: t.label.clone(),
            config,
            specialised,
            original_ns: t.in_app_ns,
            chosen_ns,
            specialised_over_joint: over_joint,
        });
    }
    Ok(choices)
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
    let median = |v: Vec<f64>| stats::Summary::of(&v).map_or(f64::NAN, |s| s.median);
    if with_original {
        t.in_app_ns
            * median(
                times
                    .iter()
                    .map(|r| r[config][k] / r[r.len() - 1][k])
                    .collect(),
            )
    } else {
        median(times.iter().map(|r| r[config][k]).collect())
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
    let mut distinct: Vec<Config> = Vec::new();
    for c in &choices {
        if !distinct.contains(&c.config) {
            distinct.push(c.config.clone());
        }
    }
    // Per distinct configuration, the indices into `configs` of its
    // contenders; the first is the configuration itself, unmoved.
    let mut configs: Vec<Config> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for c in &distinct {
        let mut group = Vec::new();
        for contender in std::iter::once(c.clone()).chain(tied_with(c, searches)) {
            group.push(configs.len());
            configs.push(contender.clone());
            for o in placements(req.base) {
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
    // rounds x configs (then the original) x contexts
    let times = searcher.retime(
        req.spec,
        req.contexts_file,
        &configs,
        req.original,
        req.rounds.max(6),
    )?;
    for (c, group) in distinct.iter().zip(&groups) {
        let users: Vec<usize> = (0..choices.len())
            .filter(|k| choices[*k].config == *c)
            .collect();
        // The program's time in the contexts using `c`, per round.
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
        let best = group[1..]
            .iter()
            .filter_map(|&i| {
                let rounds: Vec<crate::proof::Round> = as_chosen
                    .iter()
                    .zip(total(i))
                    .map(|(a, b)| crate::proof::Round {
                        order: crate::proof::Order::PlainFirst,
                        plain_s: *a,
                        tuned_s: b,
                    })
                    .collect();
                Speedup::of(&rounds, 0.95).map(|s| (i, s))
            })
            .max_by(|a, b| a.1.median.total_cmp(&b.1.median));
        let Some((i, s)) = best else { continue };
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

        fn retime(
            &mut self,
            _: &Path,
            _: &Path,
            configs: &[Config],
            _: Option<&Path>,
            rounds: usize,
        ) -> Result<Vec<Vec<Vec<f64>>>, AutotuneError> {
            self.asked = configs.to_vec();
            Ok((0..rounds)
                .map(|r| {
                    let drift = 1.0 + 0.3 * (r % 3) as f64;
                    configs
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
