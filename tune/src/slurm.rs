//! The Slurm executor: each round of the search is one `sbatch --array`
//! job whose tasks each evaluate one configuration on their node
//! (`--exclusive`, so no two timings share a node) and store the result in
//! the campaign directory. tdg polls `squeue` until the array has left the
//! queue, retries once what ended without a result (a failed, cancelled or
//! killed task, a dead node) on another node where the partition has one,
//! and records what fails twice as failed. Ctrl-C (or SIGTERM) cancels the
//! campaign's jobs with `scancel`.

use crate::campaign::{Campaign, Executor, TaskResult};
use crate::TuneError;
use config::Config;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The cluster settings a user keeps in a file (`--slurm-config`, TOML);
/// command-line flags override them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmConfig {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// `--time` of each task: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS.
    pub time_limit: Option<String>,
    /// More `sbatch` options, each one argument (`--qos=short`).
    #[serde(default)]
    pub sbatch_options: Vec<String>,
}

impl SlurmConfig {
    pub fn load(path: &Path) -> Result<SlurmConfig, TuneError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TuneError::Executor(format!("--slurm-config {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| {
            TuneError::Executor(format!(
                "--slurm-config {}: {}; the keys are partition, account, time_limit and sbatch_options",
                path.display(),
                e.message()
            ))
        })
    }

    /// `self` with every setting `over` has replacing this one's.
    pub fn overridden_by(mut self, over: SlurmConfig) -> SlurmConfig {
        self.partition = over.partition.or(self.partition);
        self.account = over.account.or(self.account);
        self.time_limit = over.time_limit.or(self.time_limit);
        self.sbatch_options.extend(over.sbatch_options);
        self
    }
}

pub struct SlurmExecutor {
    pub config: SlurmConfig,
    /// The `tdg` the tasks run (this binary: it must be at the same path
    /// on the nodes, as it is on a shared filesystem).
    pub tdg: PathBuf,
    /// Directory the tasks run in (where the campaign was started).
    pub workdir: PathBuf,
    /// Probe caches for the tasks: `None` keeps each node's own
    /// (`TDG_CACHE_DIR` as exported); otherwise under this directory, one
    /// per node unless `identical_nodes`.
    pub probe_dir: Option<PathBuf>,
    pub identical_nodes: bool,
    /// How often to ask `squeue`.
    pub poll: Duration,
    /// How long an unreachable controller is waited for before the search
    /// stops (the campaign stays resumable).
    pub unreachable_limit: Duration,
    interrupted: Arc<AtomicBool>,
}

/// How one array task ended, as `scontrol` still remembers it.
#[derive(Debug, Clone, PartialEq)]
struct TaskEnd {
    state: String,
    node: Option<String>,
}

impl SlurmExecutor {
    /// Checks that Slurm answers here, and catches Ctrl-C and SIGTERM so
    /// they cancel the campaign's jobs instead of leaving them running.
    pub fn new(config: SlurmConfig, tdg: PathBuf, workdir: PathBuf) -> Result<Self, TuneError> {
        // Slurm's clients retry an unreachable controller for many seconds;
        // `scontrol ping` answers at once.
        let out = slurm_command("scontrol", &["ping"])?;
        if !out.status.success() {
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return Err(TuneError::Executor(format!(
                "the Slurm controller does not answer (scontrol ping: {}); start slurmctld or point SLURM_CONF at the cluster's slurm.conf, or run with --executor local",
                first_line(&said)
            )));
        }
        let interrupted = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(&interrupted)).map_err(|e| {
                TuneError::Executor(format!("cannot catch Ctrl-C to cancel jobs: {e}"))
            })?;
        }
        Ok(SlurmExecutor {
            config,
            tdg,
            workdir,
            probe_dir: None,
            identical_nodes: false,
            poll: Duration::from_millis(500),
            unreachable_limit: Duration::from_secs(120),
            interrupted,
        })
    }

    /// Waits for the jobs an interrupted run of this campaign left in the
    /// queue, so `--resume` reads their results instead of timing those
    /// configurations a second time.
    pub fn wait_for_leftovers(&self, campaign: &Campaign) -> Result<usize, TuneError> {
        let mut waited = 0;
        for job in campaign_jobs(campaign) {
            if !active_tasks(&job)?.is_empty() {
                eprintln!(
                    "tdg tune: waiting for job {job}, still running from the interrupted run"
                );
                self.wait(&job, campaign)?;
                waited += 1;
            }
        }
        Ok(waited)
    }

    /// Submits one array for `configs` (task `i` reads the `i`-th from the
    /// round's `tasks.json`: [`round_task`]), returns its job id.
    fn submit(
        &self,
        campaign: &Campaign,
        configs: &[Config],
        exclude: &[String],
    ) -> Result<(String, PathBuf), TuneError> {
        let round = campaign.new_round_dir()?;
        let tasks = serde_json::to_string_pretty(configs).expect("configurations serialise");
        campaign.write_atomically(&round.join("tasks.json"), tasks.as_bytes())?;
        let script = round.join("task.sh");
        campaign.write_atomically(&script, self.task_script(&round).as_bytes())?;
        let mut args: Vec<String> = vec![
            "--parsable".into(),
            format!("--array=0-{}", configs.len() - 1),
            "--exclusive".into(),
            "--nodes=1".into(),
            // tdg retries a lost task itself, once and elsewhere; Slurm
            // requeueing it too could time a configuration twice.
            "--no-requeue".into(),
            "--job-name=tdg-tune".into(),
            format!("--chdir={}", self.workdir.display()),
            format!("--output={}/slurm-%A_%a.out", round.display()),
        ];
        if let Some(p) = &self.config.partition {
            args.push(format!("--partition={p}"));
        }
        if let Some(a) = &self.config.account {
            args.push(format!("--account={a}"));
        }
        if let Some(t) = &self.config.time_limit {
            args.push(format!("--time={t}"));
        }
        if !exclude.is_empty() {
            args.push(format!("--exclude={}", exclude.join(",")));
        }
        args.extend(self.config.sbatch_options.iter().cloned());
        args.push(script.display().to_string());
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = slurm_command("sbatch", &arg_refs)?;
        if !out.status.success() {
            return Err(TuneError::Executor(format!(
                "sbatch refused the round: {}; check the partition, account and --sbatch-option values (or `scontrol ping` for the controller)",
                first_line(&String::from_utf8_lossy(&out.stderr))
            )));
        }
        // --parsable prints "JOBID" or "JOBID;CLUSTER".
        let stdout = String::from_utf8_lossy(&out.stdout);
        let job = stdout.trim().split(';').next().unwrap_or("").to_string();
        if job.is_empty() || !job.chars().all(|c| c.is_ascii_digit()) {
            return Err(TuneError::Executor(format!(
                "sbatch printed no job id (`{}`)",
                stdout.trim()
            )));
        }
        campaign.write_atomically(&round.join("job"), job.as_bytes())?;
        tracing::debug!("round {} submitted as job {job}", round.display());
        Ok((job, round))
    }

    fn task_script(&self, round: &Path) -> String {
        let mut env = String::new();
        if let Some(dir) = &self.probe_dir {
            // Each node measures itself once and keeps the result on the
            // shared filesystem; identical nodes share one measurement.
            let cache = if self.identical_nodes {
                shell_quote(&dir.display().to_string())
            } else {
                format!(
                    "{}/\"$SLURMD_NODENAME\"",
                    shell_quote(&dir.display().to_string())
                )
            };
            env = format!("export TDG_CACHE_DIR={cache}\n");
        }
        format!(
            "#!/bin/sh\n# One evaluation of a tdg tuning campaign (written by tdg tune --executor slurm).\n{env}exec {} tune --task {}\n",
            shell_quote(&self.tdg.display().to_string()),
            shell_quote(&round.display().to_string())
        )
    }

    /// Polls until no task of `job` is queued or running; on Ctrl-C,
    /// cancels the job and stops.
    fn wait(&self, job: &str, campaign: &Campaign) -> Result<(), TuneError> {
        let mut unreachable_since: Option<Instant> = None;
        loop {
            if self.interrupted.load(Ordering::SeqCst) {
                let cancelled = campaign_jobs(campaign);
                let mut args = vec!["--quiet"];
                args.extend(cancelled.iter().map(String::as_str));
                let _ = slurm_command("scancel", &args);
                return Err(TuneError::Executor(format!(
                    "interrupted: cancelled the campaign's jobs ({}); `tdg tune --resume {}` continues it",
                    cancelled.join(", "),
                    campaign.dir.display()
                )));
            }
            // squeue retries a dead controller for about 18 s before it
            // fails, which alone outlasts a short --controller-timeout;
            // `scontrol ping` says so at once, and the time a failed
            // squeue took counts as unreachable too.
            let asked = Instant::now();
            let polled = match controller_down() {
                Some(why) => Err(TuneError::Executor(why)),
                None => active_tasks(job),
            };
            match polled {
                Ok(active) if active.is_empty() => return Ok(()),
                Ok(_) => unreachable_since = None,
                Err(e) => {
                    let since = *unreachable_since.get_or_insert(asked);
                    if since.elapsed() >= self.unreachable_limit {
                        return Err(TuneError::Executor(format!(
                            "the Slurm controller has not answered for {} s ({e}); job {job} may still be running and its results are kept: `tdg tune --resume {}` continues once the controller is back",
                            since.elapsed().as_secs(),
                            campaign.dir.display()
                        )));
                    }
                }
            }
            std::thread::sleep(self.poll);
        }
    }

    /// The nodes of the partition that could take a task, other than
    /// `exclude`.
    fn other_nodes(&self, exclude: &[String]) -> Vec<String> {
        let mut args = vec!["-h", "-N", "-o", "%N %t"];
        let p;
        if let Some(part) = &self.config.partition {
            p = format!("--partition={part}");
            args.push(&p);
        }
        let Ok(out) = slurm_command("sinfo", &args) else {
            return Vec::new();
        };
        usable_nodes(&String::from_utf8_lossy(&out.stdout))
            .into_iter()
            .filter(|n| !exclude.contains(n))
            .collect()
    }
}

/// Nodes that can run a task, from `sinfo -h -N -o "%N %t"` (a node in a
/// down, drained or failing state cannot; `*`, `~` and the like only flag
/// a state).
fn usable_nodes(sinfo: &str) -> Vec<String> {
    let mut nodes: Vec<String> = sinfo
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(_, state)| {
            let s = state
                .trim()
                .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
            matches!(s, "idle" | "mix" | "alloc" | "comp")
        })
        .map(|(n, _)| n.to_string())
        .collect();
    // A node in several partitions is listed once per partition.
    nodes.sort();
    nodes.dedup();
    nodes
}

impl Executor for SlurmExecutor {
    fn run(&mut self, campaign: &Campaign, configs: &[Config]) -> Result<(), TuneError> {
        let mut pending: Vec<Config> = configs.to_vec();
        let mut attempts = Attempts {
            history: vec![Vec::new(); configs.len()],
            exclude: Vec::new(),
        };
        for attempt in 1..=2 {
            if self.interrupted.load(Ordering::SeqCst) {
                break;
            }
            let (job, round) = self.submit(campaign, &pending, &attempts.exclude)?;
            self.wait(&job, campaign)?;
            pending = attempts.unfinished(campaign, configs, &pending, &job, &round);
            if pending.is_empty() {
                return Ok(());
            }
            if attempt == 1 {
                // Retry elsewhere when the partition has another usable
                // node; on a one-node partition, on the same node.
                if self.other_nodes(&attempts.exclude).is_empty() {
                    attempts.exclude.clear();
                }
                eprintln!(
                    "tdg tune: {} task(s) of job {job} ended without a result; retrying once{}",
                    pending.len(),
                    if attempts.exclude.is_empty() {
                        String::new()
                    } else {
                        format!(" away from {}", attempts.exclude.join(","))
                    }
                );
            }
        }
        if self.interrupted.load(Ordering::SeqCst) {
            return Err(TuneError::Executor(format!(
                "interrupted; `tdg tune --resume {}` continues the campaign",
                campaign.dir.display()
            )));
        }
        attempts.store_failures(campaign, configs, &pending)
    }
}

/// What the job arrays of one round did so far: each configuration's
/// tasks that ended without a result, and the nodes they ended on.
struct Attempts {
    /// Per configuration of the round (in its order): one line a task.
    history: Vec<Vec<String>>,
    /// Nodes a retry avoids.
    exclude: Vec<String>,
}

impl Attempts {
    /// The configurations of `pending` that job `job` (its files in
    /// `round`) left without a result, each task's end recorded.
    fn unfinished(
        &mut self,
        campaign: &Campaign,
        configs: &[Config],
        pending: &[Config],
        job: &str,
        round: &Path,
    ) -> Vec<Config> {
        let ends = task_ends(job);
        let mut still = Vec::new();
        for (i, config) in pending.iter().enumerate() {
            if campaign.result(config).is_some() {
                continue;
            }
            let end = ends.get(&i).cloned().unwrap_or(TaskEnd {
                state: "ENDED".into(),
                node: None,
            });
            let output = round.join(format!("slurm-{job}_{i}.out"));
            self.history[slot(configs, config)].push(format!(
                "task {job}_{i} {} on {}{}",
                end.state,
                end.node.as_deref().unwrap_or("an unknown node"),
                last_line(&output)
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ));
            if let Some(n) = end.node {
                if !self.exclude.contains(&n) {
                    self.exclude.push(n);
                }
            }
            still.push(config.clone());
        }
        still
    }

    /// Stores each configuration still `pending` as failed, with its tasks'
    /// ends.
    fn store_failures(
        &self,
        campaign: &Campaign,
        configs: &[Config],
        pending: &[Config],
    ) -> Result<(), TuneError> {
        for config in pending {
            let tries = self.history[slot(configs, config)].join("; ");
            // The task died without saying why (time limit, node failure):
            // T4 calls that a run-time failure.
            campaign.store(&TaskResult::failed(
                config,
                format!("{}: the Slurm task failed twice: {tries}", config),
                None,
                None,
                0.0,
            ))?;
        }
        Ok(())
    }
}

/// The index of `config` in the round's `configs`.
fn slot(configs: &[Config], config: &Config) -> usize {
    configs
        .iter()
        .position(|c| c == config)
        .expect("from configs")
}

/// Runs a Slurm client command; a missing command is the one error that
/// needs saying how to get it.
fn slurm_command(program: &str, args: &[&str]) -> Result<std::process::Output, TuneError> {
    Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                TuneError::Executor(format!(
                    "{program} not found: Slurm's client commands are not on PATH here; run tdg tune on a node that can submit jobs (a login node), or use --executor local"
                ))
            } else {
                TuneError::Executor(format!("cannot run {program}: {e}"))
            }
        })
}

/// Why the controller does not answer `scontrol ping`, or `None` when it
/// does (or when scontrol cannot say: squeue's own error then counts).
fn controller_down() -> Option<String> {
    let out = slurm_command("scontrol", &["ping"]).ok()?;
    if out.status.success() {
        return None;
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(format!("scontrol ping: {}", first_line(&said)))
}

/// Tasks of `job` still pending or running, by `squeue`; a job the
/// controller no longer knows has none.
fn active_tasks(job: &str) -> Result<Vec<String>, TuneError> {
    let out = slurm_command("squeue", &["-h", "-r", "-o", "%i %T", "-j", job])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stderr.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        return Err(TuneError::Executor(format!(
            "squeue failed ({})",
            first_line(&stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let state = l.split_whitespace().nth(1).unwrap_or("");
            !matches!(
                state,
                "COMPLETED"
                    | "CANCELLED"
                    | "FAILED"
                    | "TIMEOUT"
                    | "NODE_FAIL"
                    | "PREEMPTED"
                    | "OUT_OF_MEMORY"
                    | "BOOT_FAIL"
                    | "DEADLINE"
            )
        })
        .map(String::from)
        .collect())
}

/// How each task of an array ended (state and node), while `scontrol`
/// remembers the job (MinJobAge); empty when it has forgotten it.
fn task_ends(job: &str) -> std::collections::HashMap<usize, TaskEnd> {
    let Ok(out) = slurm_command("scontrol", &["-o", "show", "job", job]) else {
        return Default::default();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                    .map(str::to_string)
            };
            let index: usize = field("ArrayTaskId")?.parse().ok()?;
            let state = field("JobState").unwrap_or_else(|| "ENDED".into());
            let node = field("NodeList").filter(|n| !n.is_empty() && n != "(null)");
            Some((index, TaskEnd { state, node }))
        })
        .collect()
}

/// Job ids of every round the campaign submitted.
fn campaign_jobs(campaign: &Campaign) -> Vec<String> {
    let mut rounds: Vec<PathBuf> = std::fs::read_dir(campaign.dir.join("rounds"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    rounds.sort();
    rounds
        .iter()
        .filter_map(|r| std::fs::read_to_string(r.join("job")).ok())
        .map(|j| j.trim().to_string())
        .filter(|j| !j.is_empty())
        .collect()
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// The last non-empty line of a task's output, for the failure record.
fn last_line(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
}

/// Single-quoted for /bin/sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What one Slurm array task evaluates: the configuration at
/// `$SLURM_ARRAY_TASK_ID` among the round's, in the campaign the round
/// belongs to (opened, not locked: the searching tdg holds the lock).
pub struct RoundTask {
    pub campaign: Campaign,
    pub manifest: crate::Manifest,
    pub config: Config,
}

/// The task of `round` this array task runs.
pub fn round_task(round: &Path) -> Result<RoundTask, TuneError> {
    let bad = |why: String| TuneError::Executor(why);
    let index: usize = std::env::var("SLURM_ARRAY_TASK_ID")
        .ok()
        .and_then(|i| i.parse().ok())
        .ok_or_else(|| {
            bad("--task runs inside a Slurm array task (SLURM_ARRAY_TASK_ID is not set)".into())
        })?;
    let tasks = round.join("tasks.json");
    let text = std::fs::read_to_string(&tasks)
        .map_err(|e| bad(format!("cannot read {}: {e}", tasks.display())))?;
    let configs: Vec<Config> = serde_json::from_str(&text)
        .map_err(|e| bad(format!("{} is damaged: {e}", tasks.display())))?;
    let config = configs
        .get(index)
        .ok_or_else(|| bad(format!("{} has no task {index}", tasks.display())))?
        .clone();
    let campaign_dir = round
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| bad("the round directory is not inside a campaign".into()))?;
    let (campaign, manifest) = Campaign::open(campaign_dir)?;
    Ok(RoundTask {
        campaign,
        manifest,
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_keys_and_flags_override_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("slurm.toml");
        std::fs::write(
            &f,
            "partition = \"short\"\naccount = \"proj\"\ntime_limit = \"10:00\"\nsbatch_options = [\"--qos=low\"]\n",
        )
        .unwrap();
        let c = SlurmConfig::load(&f).unwrap().overridden_by(SlurmConfig {
            partition: Some("long".into()),
            sbatch_options: vec!["--constraint=avx512".into()],
            ..Default::default()
        });
        assert_eq!(c.partition.as_deref(), Some("long"));
        assert_eq!(c.account.as_deref(), Some("proj"));
        assert_eq!(c.time_limit.as_deref(), Some("10:00"));
        assert_eq!(c.sbatch_options, ["--qos=low", "--constraint=avx512"]);
        std::fs::write(&f, "partiton = \"x\"\n").unwrap();
        let e = SlurmConfig::load(&f).unwrap_err().to_string();
        assert!(e.contains("partiton") && e.contains("the keys are"), "{e}");
    }

    #[test]
    fn retries_go_to_nodes_that_are_up() {
        let sinfo = "n1 idle\nn2 down*\nn3 mix\nn3 mix\nn4 drain\nn5 alloc~\nn6 fail\n";
        assert_eq!(usable_nodes(sinfo), ["n1", "n3", "n5"]);
    }

    #[test]
    fn shell_quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }
}
