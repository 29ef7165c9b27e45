//! A tuning campaign on disk: the directory (on a filesystem every node
//! shares, for a cluster) that holds how the campaign was started and one
//! result file per evaluated configuration. Results are written atomically
//! (a temporary file renamed into place), so a reader never sees half a
//! result, a task killed mid-write leaves none, and `--resume` replays the
//! search from the stored results without timing anything twice.

use crate::measurement::Measurement;
use crate::search::{Objective, Placement};
use crate::TuneError;
use config::Config;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

const MANIFEST: &str = "campaign.json";
/// 2: the inputs' hashes and tdg's version (a campaign without them
/// cannot tell a changed implementation from the one it started with).
const MANIFEST_VERSION: u32 = 2;
/// Held (flock) by the one tdg running the campaign's search.
const LOCK: &str = "campaign.lock";

pub use crate::inputs::{CampaignSources, InputFile};

/// How the campaign was started: enough for `--resume` and for the tasks
/// on the nodes to rebuild the same objective, and to tell whether what it
/// measures is still what it started measuring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// Directory the command ran in; relative paths in `args` are relative
    /// to it (tasks run there too).
    pub cwd: PathBuf,
    /// The `tdg tune` arguments, without `--resume`.
    pub args: Vec<String>,
    /// The tdg that started it (`CARGO_PKG_VERSION`); its binary is an input.
    pub tdg_version: String,
    /// Every file the results depend on, hashed.
    pub inputs: Vec<InputFile>,
}

impl Manifest {
    pub fn new(cwd: PathBuf, args: Vec<String>, inputs: Vec<InputFile>) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            cwd,
            args,
            tdg_version: env!("CARGO_PKG_VERSION").to_string(),
            inputs,
        }
    }

    /// One digest of every input: stamped on each result, so a result
    /// made from other inputs is told apart from the campaign's own.
    pub fn inputs_digest(&self) -> String {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        for i in &self.inputs {
            hasher.update(i.role.as_bytes());
            hasher.update([0]);
            hasher.update(i.sha256.as_bytes());
            hasher.update([0]);
        }
        format!("{:x}", hasher.finalize())[..16].to_string()
    }

    /// What differs between the inputs the campaign recorded and `now`
    /// (hashed afresh), one line per file, each naming it.
    pub fn changed_inputs(&self, now: &[InputFile]) -> Vec<String> {
        let mut changes = Vec::new();
        for then in &self.inputs {
            match now.iter().find(|n| n.same_input(then)) {
                Some(n) if n.sha256 == then.sha256 => {}
                Some(n) => changes.push(then.change(n)),
                None => changes.push(format!(
                    "the {} {} is no longer one of the campaign's inputs",
                    then.role,
                    then.path.display()
                )),
            }
        }
        for n in now {
            if !self.inputs.iter().any(|t| t.same_input(n)) {
                changes.push(format!(
                    "the {} {} is new to the campaign",
                    n.role,
                    n.path.display()
                ));
            }
        }
        changes
    }
}

/// One evaluated configuration, as its task wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub config: Config,
    pub time_ns: Option<f64>,
    pub mflops: Option<f64>,
    /// Why the configuration failed (it did not build, verify or run).
    pub error: Option<String>,
    /// The contract's name for that failure, when known.
    #[serde(default)]
    pub failure: Option<failure::Failure>,
    /// Every sample's time per call.
    #[serde(default)]
    pub samples_ns: Vec<f64>,
    /// The driver's stated uncertainty of `time_ns`, per cent.
    #[serde(default)]
    pub uncertainty_pct: Option<f64>,
    pub node: String,
    pub cpu: String,
    /// Wall time of the task's build and run.
    pub seconds: f64,
    /// The Slurm job (`ARRAYJOB_TASK`) that produced it, if any.
    pub job: Option<String>,
    /// The campaign's [`Manifest::inputs_digest`] when it was stored: a
    /// result from other inputs is not the campaign's.
    #[serde(default)]
    pub inputs: String,
}

impl TaskResult {
    /// One line for the task's log: the time and where it ran, or why it
    /// failed.
    pub fn summary(&self) -> String {
        match (&self.time_ns, &self.error) {
            (Some(t), _) => format!(
                "{}: {} on {} ({}) in {:.1} s",
                self.config,
                stats::ns(*t),
                self.node,
                self.cpu,
                self.seconds
            ),
            (None, e) => format!("{}: failed: {}", self.config, e.as_deref().unwrap_or("")),
        }
    }

    /// A configuration that ended without a time, for `why` (`failure`:
    /// the contract's name for it, when known), on `placement` (`None`:
    /// no node ran it).
    pub fn failed(
        config: &Config,
        why: String,
        failure: Option<failure::Failure>,
        placement: Option<Placement>,
        seconds: f64,
    ) -> TaskResult {
        let placement = placement.unwrap_or(Placement {
            node: String::new(),
            cpu: String::new(),
        });
        TaskResult {
            config: config.clone(),
            time_ns: None,
            mflops: None,
            error: Some(why),
            failure,
            samples_ns: Vec::new(),
            uncertainty_pct: None,
            node: placement.node,
            cpu: placement.cpu,
            seconds,
            job: None,
            inputs: String::new(),
        }
    }

    pub fn measurement(&self) -> Result<Measurement, TuneError> {
        match (self.time_ns, &self.error) {
            (Some(t), None) => Ok(Measurement {
                time_ns: t,
                mflops: self.mflops,
                samples_ns: self.samples_ns.clone(),
                uncertainty_pct: self.uncertainty_pct,
                split: None,
                stopped: None,
            }),
            (_, Some(e)) => Err(match self.failure {
                Some(failure) => TuneError::Failed {
                    failure,
                    message: e.clone(),
                },
                None => TuneError::Objective(e.clone()),
            }),
            (None, None) => Err(TuneError::Objective("no time recorded".into())),
        }
    }

    pub fn placement(&self) -> Placement {
        Placement {
            node: self.node.clone(),
            cpu: self.cpu.clone(),
        }
    }
}

/// This machine as a task reports it: Slurm's node name when it runs in a
/// job (what `--exclude` takes), else the host name.
pub fn this_host() -> Placement {
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "localhost".into());
    Placement {
        node,
        cpu: probe::documented::cpu_model(),
    }
}

/// Evaluates one configuration here and now: what a task does on its node.
pub fn run_task(objective: &mut dyn Objective, config: &Config) -> TaskResult {
    let started = Instant::now();
    let result = objective.evaluate(config);
    let here = this_host();
    let job = match (
        std::env::var("SLURM_ARRAY_JOB_ID"),
        std::env::var("SLURM_ARRAY_TASK_ID"),
    ) {
        (Ok(j), Ok(t)) => Some(format!("{j}_{t}")),
        _ => std::env::var("SLURM_JOB_ID").ok(),
    };
    let (time_ns, mflops, samples_ns, uncertainty_pct, error, failure) = match result {
        Ok(m) => (
            Some(m.time_ns),
            m.mflops,
            m.samples_ns,
            m.uncertainty_pct,
            None,
            None,
        ),
        Err(e) => (
            None,
            None,
            Vec::new(),
            None,
            Some(e.to_string()),
            e.failure(),
        ),
    };
    TaskResult {
        config: config.clone(),
        time_ns,
        mflops,
        error,
        failure,
        samples_ns,
        uncertainty_pct,
        node: here.node,
        cpu: here.cpu,
        seconds: started.elapsed().as_secs_f64(),
        job,
        inputs: String::new(),
    }
}

pub struct Campaign {
    pub dir: PathBuf,
    /// [`Manifest::inputs_digest`]: results stamped with another are stale.
    inputs: String,
    /// The flock on [`LOCK`] while this process runs the campaign's search;
    /// the kernel releases it if tdg dies.
    _lock: Option<std::fs::File>,
}

/// What a campaign directory is to the guard: tdg starts a campaign only in
/// a directory it makes (or finds empty), never among a user's files.
pub const CAMPAIGN_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "tuning campaign",
    option: "--campaign",
};

/// fsguard's messages name the path already.
fn files_error(e: std::io::Error) -> TuneError {
    TuneError::Executor(e.to_string())
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> TuneError {
    move |e| TuneError::Executor(format!("{what}: {e}"))
}

impl Campaign {
    /// A new campaign in `dir` (created if missing); refuses a directory
    /// that already holds one, so no finished result is overwritten.
    pub fn create(dir: &Path, manifest: &Manifest) -> Result<Campaign, TuneError> {
        let exists = || {
            TuneError::Executor(format!(
                "{} already holds a campaign; continue it with `tdg tune --resume {}` or choose another --campaign",
                dir.display(),
                dir.display()
            ))
        };
        if dir.join(MANIFEST).exists() {
            return Err(exists());
        }
        let owned = fsguard::OwnedDir::open(dir, CAMPAIGN_DIR).map_err(files_error)?;
        for sub in ["results", "rounds"] {
            std::fs::create_dir_all(owned.path().join(sub)).map_err(io_error(format!(
                "cannot create the campaign directory {}",
                dir.display()
            )))?;
        }
        let dir = owned.path().to_path_buf();
        let lock = lock(&dir)?;
        // Another tdg may have made it between the check and the lock.
        if dir.join(MANIFEST).exists() {
            return Err(exists());
        }
        let mut c = Campaign {
            dir,
            inputs: manifest.inputs_digest(),
            _lock: Some(lock),
        };
        c.write_manifest(manifest)?;
        Ok(c)
    }

    /// An existing campaign, locked for this process's search (`--resume`):
    /// a second tdg resuming it is refused in one line until this one ends.
    pub fn open_exclusive(dir: &Path) -> Result<(Campaign, Manifest), TuneError> {
        let (mut c, m) = Campaign::open(dir)?;
        c._lock = Some(lock(&c.dir)?);
        Ok((c, m))
    }

    /// A resume's check of the inputs hashed `now` against those the
    /// campaign recorded: unchanged, nothing to do; changed, refused with
    /// one line naming each changed file and the way on (`given`: the
    /// directory as the user named it), or with `allow_changed` recorded as
    /// the campaign's inputs from here on, which makes the results stored
    /// from the old ones stale. Returns the changes it accepted.
    pub fn accept_inputs(
        &mut self,
        manifest: &Manifest,
        now: Vec<InputFile>,
        allow_changed: bool,
        given: &Path,
    ) -> Result<Vec<String>, TuneError> {
        let changed = manifest.changed_inputs(&now);
        if changed.is_empty() {
            return Ok(changed);
        }
        if !allow_changed {
            return Err(TuneError::InputsChanged(format!(
                "campaign {}: {}; its stored results would mix with new ones: `tdg tune --resume {} --allow-changed` evaluates again every configuration the search reaches, or start a new --campaign",
                self.dir.display(),
                changed.join("; "),
                given.display()
            )));
        }
        self.write_manifest(&Manifest {
            inputs: now,
            ..manifest.clone()
        })?;
        Ok(changed)
    }

    /// Records `manifest` (a resume that accepted changed inputs): results
    /// stored from here on carry its inputs, and older ones are stale.
    pub fn write_manifest(&mut self, manifest: &Manifest) -> Result<(), TuneError> {
        let text = serde_json::to_string_pretty(manifest).expect("manifest serialises");
        self.write_atomically(&self.dir.join(MANIFEST), text.as_bytes())?;
        self.inputs = manifest.inputs_digest();
        Ok(())
    }

    /// An existing campaign and how it was started.
    pub fn open(dir: &Path) -> Result<(Campaign, Manifest), TuneError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            TuneError::Executor(format!(
                "{} is not a tdg campaign ({}: {e}); pass the directory given to --campaign",
                dir.display(),
                path.display()
            ))
        })?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            TuneError::Executor(format!(
                "{}: {e}; the campaign file is damaged",
                path.display()
            ))
        })?;
        if manifest.version != MANIFEST_VERSION {
            return Err(TuneError::Executor(format!(
                "{} was written by another tdg version ({}); start a new campaign",
                path.display(),
                manifest.version
            )));
        }
        let dir = dir
            .canonicalize()
            .map_err(io_error(format!("{}", dir.display())))?;
        let inputs = manifest.inputs_digest();
        Ok((
            Campaign {
                dir,
                inputs,
                _lock: None,
            },
            manifest,
        ))
    }

    fn result_path(&self, config: &Config) -> PathBuf {
        self.dir
            .join("results")
            .join(format!("{}.json", config.file_stem()))
    }

    /// Where [`Prebuild`] keeps the configurations' builds.
    pub fn builds_dir(&self) -> PathBuf {
        self.dir.join("builds")
    }

    /// The stored result of a configuration, if a task finished it from
    /// the campaign's current inputs.
    pub fn result(&self, config: &Config) -> Option<TaskResult> {
        let text = std::fs::read_to_string(self.result_path(config)).ok()?;
        let r: TaskResult = serde_json::from_str(&text).ok()?;
        (r.inputs == self.inputs && r.config == *config).then_some(r)
    }

    /// Stores `result`, stamped with the campaign's inputs.
    pub fn store(&self, result: &TaskResult) -> Result<(), TuneError> {
        let mut result = result.clone();
        result.inputs = self.inputs.clone();
        let text = serde_json::to_string_pretty(&result).expect("results serialise");
        self.write_atomically(&self.result_path(&result.config), text.as_bytes())
    }

    /// Writes `path` so that it appears whole or not at all, even on a
    /// network filesystem shared by nodes: a uniquely named temporary in
    /// the same directory, synced, then renamed.
    pub fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<(), TuneError> {
        fsguard::write_atomic(path, bytes).map_err(files_error)
    }

    /// A fresh directory for one submission of a round.
    pub fn new_round_dir(&self) -> Result<PathBuf, TuneError> {
        let rounds = self.dir.join("rounds");
        for n in 1.. {
            let d = rounds.join(format!("{n:04}"));
            match std::fs::create_dir(&d) {
                Ok(()) => return Ok(d),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_error(format!("cannot create {}", d.display()))(e)),
            }
        }
        unreachable!("some round number is free")
    }
}

/// Takes the campaign's lock, or says in one line who holds it. The file
/// is the campaign's own (made here, in a directory tdg made), opened
/// without following a symlink; its content, the holder's pid, is only
/// shown, and read to wait a moment for a holder that has ended
/// ([`try_lock_after_a_dead_holder`]), never trusted.
fn lock(dir: &Path) -> Result<std::fs::File, TuneError> {
    use std::io::{Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(LOCK);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_error(format!(
            "cannot open the campaign lock {}",
            path.display()
        )))?;
    match try_lock_after_a_dead_holder(&file) {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = holder_pid(&mut file);
            return Err(TuneError::CampaignInUse(format!(
                "the campaign {} is in use by another tdg tune{}; wait for it to end (or stop it), then `tdg tune --resume {}`",
                dir.display(),
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                },
                dir.display()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(io_error(format!("cannot lock {}", path.display()))(e))
        }
    }
    let _ = file
        .set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| write!(file, "{}", std::process::id()));
    Ok(file)
}

/// How long a lock whose recorded holder has exited may stay taken before
/// it is refused like a live one.
const DEAD_HOLDER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// `try_lock`, waiting while the recorded holder no longer runs. The flock
/// belongs to the open file, and a child tdg forked is given a copy of the
/// descriptor until it execs (close-on-exec): a tdg killed at that moment
/// leaves the lock held by its dying child for a few milliseconds, or
/// longer on a loaded host, and a resume right after the kill would be
/// refused "in use" by a process that has ended. A live holder, this
/// process included, is refused at once; the pid is only a hint (a holder
/// on another node of a shared filesystem reads as gone here, and is
/// refused after the grace).
fn try_lock_after_a_dead_holder(file: &std::fs::File) -> Result<(), std::fs::TryLockError> {
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock)
                if started.elapsed() < DEAD_HOLDER_GRACE && holder_has_ended(file) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Whether the pid the holder wrote names no process here.
fn holder_has_ended(file: &std::fs::File) -> bool {
    let pid = holder_pid(file);
    !pid.is_empty() && !running(&pid)
}

/// The pid the lock's holder wrote (digits only, at most ten), or empty.
fn holder_pid(mut file: impl std::io::Read + std::io::Seek) -> String {
    use std::io::Read;
    let mut text = String::new();
    let _ = file
        .rewind()
        .and_then(|_| file.by_ref().take(64).read_to_string(&mut text));
    text.trim()
        .chars()
        .filter(char::is_ascii_digit)
        .take(10)
        .collect()
}

/// Whether a process with this pid exists here (signal 0 checks without
/// sending; EPERM means it exists under another owner).
fn running(pid: &str) -> bool {
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: kill with signal 0 sends nothing.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Runs a round's configurations with local tasks: one after another in
/// this process, each result stored in the campaign like a cluster task's.
pub struct LocalTasks<'a> {
    pub objective: &'a mut dyn Objective,
}

/// Where a campaign's evaluations run.
pub trait Executor {
    /// Evaluates the configurations (none of which has a stored result)
    /// and stores a result for each one it finished. A configuration
    /// without a stored result afterwards is reported as lost.
    fn run(&mut self, campaign: &Campaign, configs: &[Config]) -> Result<(), TuneError>;

    /// Whether [`Self::retime`] can time configurations again side by
    /// side, in one place (a cluster runs each configuration once, as its
    /// own task on whichever node is free).
    fn retimes(&self) -> bool {
        false
    }

    /// The configurations timed again side by side, nothing stored: the
    /// search's final re-timing, which a stored result cannot stand for.
    fn retime(&mut self, configs: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        configs
            .iter()
            .map(|c| {
                Err(TuneError::Executor(format!(
                    "{c}: this campaign's executor does not re-time"
                )))
            })
            .collect()
    }
}

impl Executor for LocalTasks<'_> {
    fn run(&mut self, campaign: &Campaign, configs: &[Config]) -> Result<(), TuneError> {
        for config in configs {
            campaign.store(&run_task(self.objective, config))?;
        }
        Ok(())
    }

    fn retimes(&self) -> bool {
        true
    }

    fn retime(&mut self, configs: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.objective.retime(configs)
    }
}

/// The search's objective for a campaign: stored results first, the rest
/// through the executor; every result read back from the campaign, so a
/// local and a cluster campaign score exactly what their tasks wrote.
/// Builds a configuration's evaluation once, on the machine tdg runs on,
/// into the campaign (a filesystem the nodes share), so that the tasks only
/// run it: for nodes identical to this machine, which then need no
/// compiler and spend no node time building.
pub trait Prebuild: Sync {
    /// Builds `values` into `dir`; the error is the configuration's result.
    fn prebuild(&self, config: &Config, dir: &Path) -> Result<(), TuneError>;
}

pub struct CampaignObjective<'a> {
    pub campaign: &'a Campaign,
    pub executor: &'a mut dyn Executor,
    /// Build every configuration here before the executor runs it.
    pub prebuild: Option<&'a dyn Prebuild>,
    /// Accept evaluations timed on different CPU models.
    pub allow_mixed_cpus: bool,
    placements: HashMap<Config, Placement>,
    /// The CPU model and node of the campaign's first evaluation.
    first_cpu: Option<Placement>,
}

impl<'a> CampaignObjective<'a> {
    pub fn new(
        campaign: &'a Campaign,
        executor: &'a mut dyn Executor,
        allow_mixed_cpus: bool,
    ) -> Self {
        CampaignObjective {
            campaign,
            executor,
            allow_mixed_cpus,
            prebuild: None,
            placements: HashMap::new(),
            first_cpu: None,
        }
    }

    fn check_cpu(&mut self, r: &TaskResult) -> Result<(), TuneError> {
        if r.cpu.is_empty() {
            return Ok(());
        }
        let first = self.first_cpu.get_or_insert_with(|| r.placement());
        if first.cpu != r.cpu && !self.allow_mixed_cpus {
            return Err(TuneError::Executor(format!(
                "{} ran on node {} ({}) but the campaign began on node {} ({}); timings from different CPU models do not compare: restrict the campaign to one model (--partition or --sbatch-option=--constraint=...), or pass --allow-mixed-cpus",
                r.config,
                r.node,
                r.cpu,
                first.node,
                first.cpu
            )));
        }
        Ok(())
    }
}

/// Builds the configurations side by side (one per CPU of this machine),
/// keeping each build in the campaign; a configuration that fails to build
/// has its failure stored as its result and is not handed to the executor.
/// Returns the configurations that built.
fn prebuild_all(
    campaign: &Campaign,
    builder: &dyn Prebuild,
    configs: &[Config],
) -> Result<Vec<Config>, TuneError> {
    let here = this_host();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes: Vec<(usize, Result<(), TuneError>, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers.min(configs.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(config) = configs.get(i) else {
                            return done;
                        };
                        let started = Instant::now();
                        let dir = campaign.builds_dir().join(config.file_stem());
                        let r = builder.prebuild(config, &dir);
                        done.push((i, r, started.elapsed().as_secs_f64()));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a build thread does not panic"))
            .collect()
    });
    let mut built = vec![false; configs.len()];
    for (i, result, seconds) in outcomes {
        match result {
            Ok(()) => built[i] = true,
            Err(e) => campaign.store(&TaskResult::failed(
                &configs[i],
                e.to_string(),
                e.failure(),
                Some(here.clone()),
                seconds,
            ))?,
        }
    }
    Ok(configs
        .iter()
        .zip(built)
        .filter(|(_, b)| *b)
        .map(|(c, _)| c.clone())
        .collect())
}

impl Objective for CampaignObjective<'_> {
    fn evaluate(&mut self, config: &Config) -> Result<Measurement, TuneError> {
        crate::search::evaluate_as_round(self, config)
    }

    fn evaluate_round(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        let mut missing: Vec<Config> = round
            .iter()
            .filter(|v| self.campaign.result(v).is_none())
            .cloned()
            .collect();
        if let Some(builder) = self.prebuild {
            match prebuild_all(self.campaign, builder, &missing) {
                Ok(built) => missing = built,
                Err(e) => return round.iter().map(|_| Err(clone_error(&e))).collect(),
            }
        }
        if !missing.is_empty() {
            if let Err(e) = self.executor.run(self.campaign, &missing) {
                return round.iter().map(|_| Err(clone_error(&e))).collect();
            }
        }
        round
            .iter()
            .map(|config| {
                let r = self.campaign.result(config).ok_or_else(|| {
                    TuneError::Executor(format!(
                        "{}: the task finished without storing a result in {}",
                        config,
                        self.campaign.dir.display()
                    ))
                })?;
                self.check_cpu(&r)?;
                self.placements.insert(config.clone(), r.placement());
                r.measurement()
            })
            .collect()
    }

    /// Timed again through the executor: the stored results are the
    /// search's figures, and re-reading them is no re-timing.
    fn retime(&mut self, round: &[Config]) -> Vec<Result<Measurement, TuneError>> {
        self.executor.retime(round)
    }

    fn retimes(&self) -> bool {
        self.executor.retimes()
    }

    fn placement(&self, config: &Config) -> Option<Placement> {
        self.placements.get(config).cloned()
    }
}

fn clone_error(e: &TuneError) -> TuneError {
    match e {
        TuneError::Objective(s) => TuneError::Objective(s.clone()),
        TuneError::Failed { failure, message } => TuneError::Failed {
            failure: *failure,
            message: message.clone(),
        },
        other => TuneError::Executor(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl Objective for Fixed {
        fn evaluate(&mut self, v: &Config) -> Result<Measurement, TuneError> {
            let nb = v.get("NB").unwrap();
            if nb < 0 {
                return Err(TuneError::Objective("negative".into()));
            }
            Ok(Measurement {
                time_ns: 1000.0 + nb as f64,
                mflops: None,
                samples_ns: Vec::new(),
                uncertainty_pct: None,
                split: None,
                stopped: None,
            })
        }
    }

    fn nb(v: i64) -> Config {
        Config::from_pairs([("NB", v)]).unwrap()
    }

    fn manifest() -> Manifest {
        Manifest::new("/".into(), vec!["x".into()], Vec::new())
    }

    #[test]
    fn results_are_stored_once_and_served_from_the_campaign() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = Campaign::create(dir.path(), &manifest()).unwrap();
        let mut inner = Fixed;
        let mut local = LocalTasks {
            objective: &mut inner,
        };
        let mut obj = CampaignObjective::new(&campaign, &mut local, false);
        let round = vec![nb(3), nb(-1)];
        let r = obj.evaluate_round(&round);
        assert_eq!(r[0].as_ref().unwrap().time_ns, 1003.0);
        assert!(r[1].as_ref().unwrap_err().to_string().contains("negative"));
        assert_eq!(obj.placement(&round[0]).unwrap(), this_host());
        let stored = campaign.result(&round[0]).unwrap();
        assert_eq!(stored.time_ns, Some(1003.0));
        // A second campaign objective over the same directory reads the
        // result instead of evaluating again.
        struct Never;
        impl Executor for Never {
            fn run(&mut self, _: &Campaign, c: &[Config]) -> Result<(), TuneError> {
                panic!("evaluated again: {c:?}");
            }
        }
        let (again, m) = Campaign::open(dir.path()).unwrap();
        assert_eq!(m, manifest());
        let mut never = Never;
        let mut obj = CampaignObjective::new(&again, &mut never, false);
        assert_eq!(obj.evaluate(&round[0]).unwrap().time_ns, 1003.0);
        let err = Campaign::create(dir.path(), &manifest()).err().unwrap();
        assert!(err.to_string().contains("--resume"), "{err}");
    }

    #[test]
    fn a_categorical_configuration_is_stored_and_served_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = Campaign::create(dir.path(), &manifest()).unwrap();
        let config = Config::from_pairs([
            ("ORDER", config::Value::name("ikj").unwrap()),
            ("NB", config::Value::Int(5)),
        ])
        .unwrap();
        let mut inner = Fixed;
        let mut local = LocalTasks {
            objective: &mut inner,
        };
        let mut obj = CampaignObjective::new(&campaign, &mut local, false);
        assert_eq!(obj.evaluate(&config).unwrap().time_ns, 1005.0);
        let stored = std::fs::read_to_string(campaign.result_path(&config)).unwrap();
        assert!(stored.contains(r#""ORDER": "ikj""#), "{stored}");
        struct Never;
        impl Executor for Never {
            fn run(&mut self, _: &Campaign, c: &[Config]) -> Result<(), TuneError> {
                panic!("evaluated again: {c:?}");
            }
        }
        let (again, _) = Campaign::open(dir.path()).unwrap();
        assert_eq!(again.result(&config).unwrap().config, config);
        let mut never = Never;
        let mut obj = CampaignObjective::new(&again, &mut never, false);
        assert_eq!(obj.evaluate(&config).unwrap().time_ns, 1005.0);
    }

    #[test]
    fn a_lock_left_to_an_ended_holders_child_is_taken_once_the_child_ends() {
        let dir = tempfile::tempdir().unwrap();
        // The recorded holder: a process that has ended and been reaped.
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        ended.wait().unwrap();
        std::fs::write(dir.path().join(LOCK), ended.id().to_string()).unwrap();
        // Its child, still holding the flock for a moment.
        let mut child = std::process::Command::new("flock")
            .arg(dir.path().join(LOCK))
            .args(["sleep", "0.5"])
            .spawn()
            .unwrap();
        let lock_file = dir.path().join(LOCK);
        let started = Instant::now();
        while std::process::Command::new("flock")
            .args(["-n", "-E", "9"])
            .arg(&lock_file)
            .arg("true")
            .status()
            .unwrap()
            .code()
            != Some(9)
        {
            assert!(
                started.elapsed().as_secs() < 20,
                "flock never took the lock"
            );
        }
        let held = lock(dir.path()).expect("taken once the ended holder's child lets go");
        assert!(
            child.try_wait().unwrap().is_some(),
            "the lock was taken while the child still held it"
        );
        child.wait().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK)).unwrap(),
            std::process::id().to_string()
        );
        drop(held);
    }

    #[test]
    fn a_campaign_is_locked_while_it_runs_and_results_from_other_inputs_are_stale() {
        let dir = tempfile::tempdir().unwrap();
        let impl_c = dir.path().join("k.c");
        std::fs::write(&impl_c, "int k;\n").unwrap();
        let inputs = vec![InputFile::hash("implementation", &impl_c).unwrap()];
        let m = Manifest::new("/".into(), vec!["x".into()], inputs.clone());
        let campaign = Campaign::create(&dir.path().join("c"), &m).unwrap();
        // A second search of the same campaign is refused while this one
        // holds it, naming this process; reading it (a task) is not.
        let e = Campaign::open_exclusive(&campaign.dir).err().unwrap();
        // The contract's "not ready" status (7), not a generic failure.
        assert_eq!(e.failure(), Some(failure::Failure::Environment));
        let e = e.to_string();
        assert!(
            e.contains("in use by another tdg tune")
                && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        assert!(Campaign::open(&campaign.dir).is_ok());
        let config = nb(2);
        campaign.store(&run_task(&mut Fixed, &config)).unwrap();
        drop(campaign);
        let (mut again, m) = Campaign::open_exclusive(&dir.path().join("c")).unwrap();
        assert!(again.result(&config).is_some());

        std::fs::write(&impl_c, "int k = 1;\n").unwrap();
        let now = vec![InputFile::hash("implementation", &impl_c).unwrap()];
        let changed = m.changed_inputs(&now);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert!(changed[0].contains("implementation") && changed[0].contains("k.c"));
        assert!(m.changed_inputs(&inputs).is_empty());
        // Accepting the change makes the old result stale: evaluated again.
        let accepted = Manifest { inputs: now, ..m };
        again.write_manifest(&accepted).unwrap();
        assert!(again.result(&config).is_none());
        let (reread, stored) = Campaign::open(&again.dir).unwrap();
        assert_eq!(stored, accepted);
        assert!(reread.result(&config).is_none());
    }

    /// Builds into `dir` a file naming the configuration, refusing odd NB
    /// as a compiler would refuse a configuration.
    struct EvenOnly;
    impl Prebuild for EvenOnly {
        fn prebuild(&self, v: &Config, dir: &Path) -> Result<(), TuneError> {
            if v.get("NB").unwrap() % 2 == 1 {
                return Err(TuneError::Failed {
                    failure: failure::Failure::Compile,
                    message: format!("{}: does not compile", v),
                });
            }
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("built"), v.to_string()).unwrap();
            Ok(())
        }
    }

    /// Runs only what was built, and records what it was handed.
    struct RunsKept<'a>(&'a mut Vec<String>);
    impl Executor for RunsKept<'_> {
        fn run(&mut self, c: &Campaign, configs: &[Config]) -> Result<(), TuneError> {
            for v in configs {
                let built =
                    std::fs::read_to_string(c.builds_dir().join(v.file_stem()).join("built"));
                assert_eq!(built.unwrap(), v.to_string());
                self.0.push(v.to_string());
                c.store(&run_task(&mut Fixed, v))?;
            }
            Ok(())
        }
    }

    #[test]
    fn prebuilt_rounds_hand_the_executor_only_what_built() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = Campaign::create(dir.path(), &manifest()).unwrap();
        let mut handed = Vec::new();
        let mut executor = RunsKept(&mut handed);
        let mut obj = CampaignObjective::new(&campaign, &mut executor, false);
        obj.prebuild = Some(&EvenOnly);
        let round: Vec<Config> = (1..=5).map(nb).collect();
        let r = obj.evaluate_round(&round);
        for (n, result) in (1..=5).zip(&r) {
            match result {
                Ok(m) => assert!(n % 2 == 0 && m.time_ns == 1000.0 + n as f64),
                Err(e) => {
                    assert!(n % 2 == 1);
                    assert_eq!(e.failure(), Some(failure::Failure::Compile), "{e}");
                }
            }
        }
        assert_eq!(handed, ["NB=2", "NB=4"]);
        // The build failures are stored: the campaign does not build them again.
        assert!(campaign
            .result(&round[0])
            .unwrap()
            .error
            .unwrap()
            .contains("does not compile"));
    }

    #[test]
    fn a_different_cpu_model_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let campaign = Campaign::create(dir.path(), &manifest()).unwrap();
        for (n, node, cpu) in [(1, "n1", "Xeon A"), (2, "n2", "Xeon B")] {
            campaign
                .store(&TaskResult {
                    config: nb(n),
                    time_ns: Some(10.0),
                    mflops: None,
                    error: None,
                    failure: None,
                    samples_ns: Vec::new(),
                    uncertainty_pct: None,
                    node: node.into(),
                    cpu: cpu.into(),
                    seconds: 0.1,
                    job: None,
                    inputs: String::new(),
                })
                .unwrap();
        }
        let round = vec![nb(1), nb(2)];
        let mut inner = Fixed;
        let mut local = LocalTasks {
            objective: &mut inner,
        };
        let mut obj = CampaignObjective::new(&campaign, &mut local, false);
        let r = obj.evaluate_round(&round);
        assert!(r[0].is_ok());
        let e = r[1].as_ref().unwrap_err().to_string();
        assert!(
            e.contains("Xeon B") && e.contains("--allow-mixed-cpus"),
            "{e}"
        );
        let mut obj = CampaignObjective::new(&campaign, &mut local, true);
        assert!(obj.evaluate_round(&round).iter().all(|r| r.is_ok()));
    }

    /// NB=2 is timed fast once (a quiet moment of the host) and slow ever
    /// after; NB=1 is the faster one.
    #[derive(Default)]
    struct LuckyOnce {
        nb2_timings: usize,
    }
    impl Objective for LuckyOnce {
        fn evaluate(&mut self, v: &Config) -> Result<Measurement, TuneError> {
            let ns = match v.get("NB").unwrap() {
                2 => {
                    self.nb2_timings += 1;
                    if self.nb2_timings == 1 {
                        50.0
                    } else {
                        200.0
                    }
                }
                n => 100.0 * n as f64,
            };
            Ok(Measurement {
                time_ns: ns,
                mflops: None,
                samples_ns: Vec::new(),
                uncertainty_pct: None,
                split: None,
                stopped: None,
            })
        }
    }

    /// Answers a round from what it was handed, and cannot re-time.
    struct OnceEach<'a>(&'a mut LuckyOnce);
    impl Executor for OnceEach<'_> {
        fn run(&mut self, c: &Campaign, configs: &[Config]) -> Result<(), TuneError> {
            configs
                .iter()
                .try_for_each(|v| c.store(&run_task(self.0, v)))
        }
    }

    #[test]
    fn a_campaigns_finalists_are_timed_again_not_read_back() {
        let space =
            crate::space::Space::new(vec![crate::space::parse_param("NB=1:3").unwrap()]).unwrap();
        let search = |executor: &mut dyn Executor| {
            let dir = tempfile::tempdir().unwrap();
            let campaign = Campaign::create(dir.path(), &manifest()).unwrap();
            let mut obj = CampaignObjective::new(&campaign, executor, false);
            let mut notes = Notes::default();
            let out = crate::search::Tuner::new(&space, &mut obj, &mut notes, None, 3)
                .exhaustive()
                .unwrap();
            (out.best.to_string(), notes.0)
        };
        let mut lucky = LuckyOnce::default();
        let (best, notes) = search(&mut LocalTasks {
            objective: &mut lucky,
        });
        assert_eq!(best, "NB=1", "{notes:?}");
        assert!(lucky.nb2_timings > 1);
        // An executor that cannot re-time says so; the search's own order
        // stands, and the stored results are not passed off as re-timings.
        let mut lucky = LuckyOnce::default();
        let (best, notes) = search(&mut OnceEach(&mut lucky));
        assert_eq!(best, "NB=2");
        assert_eq!(lucky.nb2_timings, 1);
        assert!(
            notes.iter().any(|n| n.contains("not re-timed")),
            "{notes:?}"
        );
    }

    #[derive(Default)]
    struct Notes(Vec<String>);
    impl crate::search::Progress for Notes {
        fn evaluated(&mut self, _: &crate::search::Evaluation, _: usize, _: &str) {}
        fn note(&mut self, line: &str) {
            self.0.push(line.to_string());
        }
    }
}
