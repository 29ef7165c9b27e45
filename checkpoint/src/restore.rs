//! Restoring an image once: a fresh PID namespace per restore (the copy keeps
//! its original PID without colliding with anything), substitutes for the
//! descriptors whose other side is gone, and a pipe for the copy's time.

use crate::capture_info::{
    restore_substitutes, InheritedDescriptor, PrivateFile, SeedFrom, Substitute,
};
use crate::criu::{diagnose_log, Criu};
use crate::error::{io_err, CheckpointError, Result};
use crate::manifest::Manifest;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Restore logs are `restore.<tdg pid>.<n>.log` in the plan's private work
/// directory (never in the image: CRIU opens its files following links), n
/// counting this process's restores; a failed restore's log is kept apart
/// (`tdg-restore-XXXXXX.log` under `$TMPDIR`) and named in the error.
pub const RESTORE_LOG_PREFIX: &str = "restore.";
/// This process's restores so far. Each restore logs to a file of its own:
/// with one name per process, the next restore of the same image (a search
/// retrying a round, the next sample) truncated a failed restore's log, and
/// removed it when it went well, so an error named a log that was gone.
static RESTORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The restorer's descriptor that carries the result pipe into the copy.
const RESULT_FD: i32 = 3;
/// The restorer's descriptor that carries the control pipe (when the image has one).
const CONTROL_FD: i32 = 4;

/// A candidate implementation, built ([`crate::build_candidate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What the copies dlopen().
    pub shared_object: PathBuf,
    /// The C file it was built from (for messages and reports).
    pub source: PathBuf,
}

/// What one restored copy is told to do through the control pipe.
#[derive(Debug, Clone, Default)]
pub struct CopyInstructions {
    /// TDG_ROUTINE calls of the timed site run this candidate.
    pub candidate: Option<Candidate>,
    /// Write the region's declared outputs here after the timed call.
    pub outputs: Option<PathBuf>,
}

impl CopyInstructions {
    /// The control pipe's text, as tdg_checkpoint.c's follow_control reads it.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Some(p) = &self.outputs {
            text.push_str(&format!("outputs={}\n", p.display()));
        }
        if let Some(c) = &self.candidate {
            text.push_str(&format!("candidate={}\n", c.shared_object.display()));
        }
        text
    }

    fn is_empty(&self) -> bool {
        self.candidate.is_none() && self.outputs.is_none()
    }
}

/// One output the copy wrote (in order, back to back, into the outputs file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLayout {
    pub count: u64,
    pub elem_size: u64,
    /// TDG_OUTPUT_BYTES/SIGNED/UNSIGNED/FLOAT (tdg_checkpoint.h).
    pub kind: u32,
}

/// One restored copy's measurement.
#[derive(Debug, Clone)]
pub struct RestoredRun {
    /// The region's wall-clock time inside the copy.
    pub region_ns: u64,
    /// The region's CPU time (preemption excluded).
    pub region_cpu_ns: u64,
    /// The whole restore, replayed calls and exit, seen from tdg.
    pub wall: Duration,
    /// The outputs the copy wrote, when asked to.
    pub outputs: Vec<OutputLayout>,
    /// Minor page faults inside the timed call (None: an older host library).
    pub minor_faults: Option<u64>,
    /// A forked sample's preparation (pre-faulting, flushing) and replayed
    /// delay calls, measured inside the child.
    pub phases: Option<SamplePhases>,
    /// A copy with threads: how many ran, and worked, in the timed call.
    pub team: Option<TeamUse>,
    /// The state the timed call ran in (None: an older host library).
    pub state: Option<crate::fidelity::CallState>,
    /// CRIU's log of this restore, when the plan keeps logs.
    pub kept_log: Option<PathBuf>,
}

/// The threads of a copy over its timed call (`team threads=T
/// busy_threads=B team_cpu_ns=C`, written by copies with more than one
/// thread): each thread's CPU clock read before and after the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TeamUse {
    /// Threads in the process at the call's end.
    pub threads: u64,
    /// Of them, those that ran at least a quarter of the busiest one's CPU
    /// time in the call (a pool sleeping through it does not).
    pub busy_threads: u64,
    /// Their CPU time in the call, summed.
    pub cpu_ns: u64,
}

impl TeamUse {
    /// From a `team ...` line.
    pub fn parse(line: &str) -> Option<TeamUse> {
        let rest = line.strip_prefix("team ")?;
        Some(TeamUse {
            threads: line_field(rest, "threads=")?,
            busy_threads: line_field(rest, "busy_threads=")?,
            cpu_ns: line_field(rest, "team_cpu_ns=")?,
        })
    }
}

/// Where a forked sample's time went, besides the timed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SamplePhases {
    /// fork() in the sampler until the child's first instruction.
    #[serde(default)]
    pub fork_ns: u64,
    /// Pre-faulting the pages and flushing the caches (`flush_ns` of it).
    pub prepare_ns: u64,
    /// Minor faults while pre-faulting (the copies the timed call is spared).
    #[serde(default)]
    pub prepare_faults: u64,
    /// The part of `prepare_ns` spent flushing the pages a replay touches.
    #[serde(default)]
    pub flush_ns: u64,
    /// The replayed delay calls, up to the timed call.
    pub delay_ns: u64,
}

/// Everything needed to restore one image repeatedly.
#[derive(Debug, Clone)]
pub struct RestorePlan {
    pub image: PathBuf,
    pub criu: PathBuf,
    pub unshare: PathBuf,
    pub setsid: PathBuf,
    pub result_channel: String,
    pub control_channel: Option<String>,
    /// Passed to every copy for TSC region timing (None: clock_gettime).
    pub tsc_ghz: Option<f64>,
    pub substitutes: Vec<InheritedDescriptor>,
    /// The application held a terminal: give CRIU a fresh one to restore
    /// the session onto (`--shell-job` takes it from the restorer's stdin).
    pub needs_terminal: bool,
    pub timeout: Duration,
    /// The image's host library can take many samples per restore by fork.
    pub fork_samples: bool,
    /// CRIU's log level (2: errors and warnings; 4: every step, timestamped,
    /// for a breakdown of where a restore's time goes).
    pub log_level: u8,
    /// Keep the restore log after a good restore (for that breakdown;
    /// [`RestoredRun::kept_log`] names it).
    pub keep_log: bool,
    /// CRIU's work directory (its log, `stats-restore`): private to tdg.
    pub work: std::sync::Arc<fsguard::ScratchDir>,
    /// Files CRIU reopens by the path they had at the capture, handed to it
    /// from where they are now (`--inherit-fd`): the directory the image
    /// was captured in, and the region shim inside it. An image is captured
    /// into a staged directory and moved into place, and may move again.
    pub relocated: Vec<Relocated>,
    /// What the copies did to each private file, by substitute (the ones
    /// that are files), over every restore of this plan.
    pub effects: std::sync::Arc<std::sync::Mutex<Vec<FileEffect>>>,
}

/// What restored copies did to one of the application's files, all in
/// the private copies they were given (the file itself is untouched).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileEffect {
    /// The application's file.
    pub path: String,
    /// Restores whose copies wrote to it, and restores in all.
    pub restores_writing: u64,
    pub restores: u64,
    /// What its private copies grew by, in all.
    pub bytes_added: u64,
    /// The copies could only append to it.
    pub appends: bool,
    /// Its private copies were made in tdg's work directory (its own
    /// directory cannot hold an unnamed file), on another file system.
    #[serde(default)]
    pub elsewhere: bool,
}

impl FileEffect {
    /// One line for the timing report.
    pub fn render_text(&self) -> String {
        if self.restores_writing == 0 {
            return format!(
                "files: the copies did not write {} (given a private copy in each of {} restore(s))\n",
                self.path, self.restores
            );
        }
        format!(
            "files: the copies {} {} in {} of {} restore(s), all into private copies; {} itself is untouched\n",
            if self.appends { "appended" } else { "wrote" },
            if self.bytes_added > 0 || self.appends {
                format!("{} to {}", stats::bytes(self.bytes_added), self.path)
            } else {
                self.path.clone()
            },
            self.restores_writing,
            self.restores,
            self.path
        )
    }
}

/// A private file made for one restore, and how it was left for the copy.
struct MadePrivate {
    index: usize,
    /// The file with no name (kept open to see what the copies did).
    file: std::fs::File,
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// Made in tdg's work directory: the file's own cannot hold one.
    elsewhere: bool,
}

/// A regular file with no name in `dir` (`O_TMPFILE`): nothing appears or
/// is replaced there, it goes with the last descriptor, and it lives on the
/// application's file system, so the copies' writes cost the kernel what the
/// application's do (docs/checkpoint.md, "Fidelity of short regions").
fn unnamed_file(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .mode(0o600)
        .open(dir)
}
/// A file of the image CRIU knows by its captured path (`key`, without the
/// leading `/`), opened from `now` for each restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocated {
    pub key: String,
    pub now: PathBuf,
}

/// What a restore hands CRIU for the image's own files: the captured image
/// directory and everything under its `preload/` (the shim a `--spec`
/// capture maps), each by its captured path, from `image` where it is now.
pub fn relocations(image: &Path, captured: &Path) -> Vec<Relocated> {
    let key = |p: &Path| p.to_string_lossy().trim_start_matches('/').to_string();
    if captured.as_os_str().is_empty() {
        return Vec::new();
    }
    let mut out = vec![Relocated {
        key: key(captured),
        now: image.to_path_buf(),
    }];
    let preload = image.join(crate::capture::PRELOAD_DIR);
    if let Ok(entries) = std::fs::read_dir(&preload) {
        let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for name in names {
            out.push(Relocated {
                key: key(&captured.join(crate::capture::PRELOAD_DIR).join(&name)),
                now: preload.join(&name),
            });
        }
    }
    out
}

/// util-linux's `unshare` or `setsid`, which every restore runs through.
pub fn find_util_linux(tool: &'static str) -> Result<PathBuf> {
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
        .ok_or(CheckpointError::NoUtilLinux { tool })
}

impl RestorePlan {
    pub fn new(
        image: &Path,
        manifest: &Manifest,
        criu: &Criu,
        timeout: Duration,
    ) -> Result<RestorePlan> {
        Ok(RestorePlan {
            image: image.to_path_buf(),
            criu: criu.path.clone(),
            unshare: find_util_linux("unshare")?,
            setsid: find_util_linux("setsid")?,
            result_channel: manifest.capture.result_channel.clone(),
            control_channel: manifest.capture.control_channel.clone(),
            tsc_ghz: crate::tsc::region_tsc_ghz(),
            substitutes: restore_substitutes(&manifest.capture)
                .into_iter()
                .filter(|s| !s.key.starts_with("tty["))
                .collect(),
            needs_terminal: manifest
                .capture
                .descriptors
                .iter()
                .any(|d| d.tty_key.is_some()),
            timeout,
            fork_samples: manifest.capture.fork_samples,
            log_level: 2,
            keep_log: false,
            work: std::sync::Arc::new(
                toolchain::scratch_dir("tdg-restore")
                    .map_err(io_err("cannot create a scratch directory"))?,
            ),
            relocated: relocations(image, &manifest.capture.image),
            effects: Default::default(),
        })
    }

    /// A name no other restore of this process uses, for CRIU's log (`-o`
    /// names a file in the private work directory).
    pub fn new_log_name() -> String {
        let n = RESTORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("{RESTORE_LOG_PREFIX}{}.{n}.log", std::process::id())
    }

    /// What the copies did to the application's files so far.
    pub fn file_effects(&self) -> Vec<FileEffect> {
        self.effects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| !e.path.is_empty())
            .cloned()
            .collect()
    }

    /// The copy's private file for substitute `index`, made afresh for
    /// this restore with no name in the file's own directory (tdg's work
    /// directory where that cannot hold one): as long as the
    /// application's file was at the checkpoint (write-only), or holding
    /// its content (read-write: from the image, else the file now), opened
    /// as the application had it, at its offset.
    fn make_private(&self, index: usize, p: &PrivateFile) -> Result<(OwnedFd, MadePrivate)> {
        use std::os::unix::fs::OpenOptionsExt;
        let err = |what: &str| {
            io_err(format!(
                "cannot {what} the copies' private file for {}",
                p.path
            ))
        };
        let dir = Path::new(&p.path).parent().unwrap_or(Path::new("/"));
        let (mut file, elsewhere) = match unnamed_file(dir) {
            Ok(f) => (f, false),
            Err(_) => (unnamed_file(self.work.path()).map_err(err("create"))?, true),
        };
        match &p.seed {
            SeedFrom::Size => file.set_len(p.offset).map_err(err("size"))?,
            SeedFrom::Image(name) => {
                let mut from = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(self.image.join(name))
                    .map_err(err("seed"))?;
                std::io::copy(&mut from, &mut file).map_err(err("seed"))?;
            }
            SeedFrom::Current => {
                // read only, never through a link planted since the capture
                let mut from = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(&p.path)
                    .map_err(err("seed"))?;
                std::io::copy(&mut from, &mut file).map_err(err("seed"))?;
            }
        }
        let meta = file.metadata().map_err(err("seed"))?;
        // The copy's own open of it, as the application had the file:
        // read-write or write-only, appending or not, at its offset.
        let opened = std::fs::OpenOptions::new()
            .read(p.read)
            .write(true)
            .append(p.append)
            .custom_flags(libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(err("open"))?;
        {
            use std::io::Seek;
            (&opened)
                .seek(std::io::SeekFrom::Start(p.offset))
                .map_err(err("position"))?;
        }
        Ok((
            opened.into(),
            MadePrivate {
                index,
                file,
                len: meta.len(),
                modified: meta.modified().ok(),
                elsewhere,
            },
        ))
    }

    /// After a restore: what its copies did to each private file.
    fn account(&self, made: Vec<MadePrivate>, reported: &str) {
        let mut effects = self.effects.lock().unwrap_or_else(|e| e.into_inner());
        if effects.len() < self.substitutes.len() {
            effects.resize(self.substitutes.len(), FileEffect::default());
        }
        for m in made {
            let Substitute::Private(p) = &self.substitutes[m.index].substitute else {
                continue;
            };
            let now = m.file.metadata().ok();
            let len = now.as_ref().map_or(m.len, |n| n.len());
            let wrote = now
                .as_ref()
                .is_some_and(|n| n.len() != m.len || n.modified().ok() != m.modified);
            let e = &mut effects[m.index];
            e.path.clone_from(&p.path);
            e.appends = p.append;
            e.restores += 1;
            e.restores_writing += u64::from(wrote);
            e.bytes_added += len.saturating_sub(m.len);
            e.elsewhere |= m.elsewhere;
            // What a sampling copy wrote past the checkpoint's size and cut
            // off again after each sample (`file_trimmed`).
            let fds = &self.substitutes[m.index].app_fds;
            for line in reported.lines().filter(|l| l.starts_with("file_trimmed ")) {
                if let (Some(fd), Some(bytes)) =
                    (line_field(line, "fd="), line_field(line, "bytes="))
                {
                    if fds.iter().any(|&f| f as u64 == fd) {
                        e.bytes_added += bytes;
                        e.restores_writing += u64::from(!wrote && bytes > 0);
                    }
                }
            }
        }
    }

    /// A failed restore's `log` kept apart for the user (the work directory
    /// goes when tdg ends): named in errors.
    pub fn kept(log: &Path) -> PathBuf {
        fsguard::keep_copy(log, "tdg-restore").unwrap_or_else(|_| log.to_path_buf())
    }

    /// The restore command line (without the descriptor plumbing), CRIU
    /// logging to `log_name` in the private work directory.
    pub fn command(&self, log_name: &str) -> Command {
        let mut cmd = Command::new(&self.unshare);
        // --kill-child: if tdg kills unshare (timeout), criu, the namespace's
        // init, dies too and the kernel kills every process in it.
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"]);
        // criu, the namespace's init, leads its own session and process
        // group: a `--shell-job` copy that was not a session leader joins the
        // restorer's session and group, and an inherited session or group
        // outside the namespace reads as 0 inside it. A copy that held a
        // terminal also needs the fresh terminal to be that session's
        // controlling one: CRIU makes the copy's group its foreground group
        // (TIOCSPGRP), which only a session's own terminal accepts.
        cmd.arg(&self.setsid).arg("--wait");
        if self.needs_terminal {
            cmd.arg("--ctty");
        }
        cmd.arg(&self.criu)
            .arg("restore")
            .arg("-D")
            .arg(&self.image)
            .arg("--shell-job")
            .arg("--work-dir")
            .arg(self.work.path())
            .arg(format!("-v{}", self.log_level))
            .arg("-o")
            .arg(log_name)
            .arg("--inherit-fd")
            .arg(format!("fd[{RESULT_FD}]:{}", self.result_channel));
        if let Some(control) = &self.control_channel {
            cmd.arg("--inherit-fd")
                .arg(format!("fd[{CONTROL_FD}]:{control}"));
        }
        let first = self.first_substitute_fd();
        let keys = self
            .substitutes
            .iter()
            .map(|s| &s.key)
            .chain(self.relocated.iter().map(|r| &r.key));
        for (i, key) in keys.enumerate() {
            cmd.arg("--inherit-fd")
                .arg(format!("fd[{}]:{key}", first + i as i32));
        }
        cmd
    }

    fn first_substitute_fd(&self) -> i32 {
        if self.control_channel.is_some() {
            CONTROL_FD + 1
        } else {
            RESULT_FD + 1
        }
    }

    /// A candidate or outputs need the control pipe, which images captured
    /// by an older host library lack.
    pub fn check_instructions(&self, instructions: &CopyInstructions) -> Result<()> {
        if self.control_channel.is_none() && !instructions.is_empty() {
            return Err(CheckpointError::InvalidRequest(format!(
                "{} was captured by an older tdg_checkpoint.c without the control pipe, so its copies cannot load a candidate; \
                 rebuild the application with `tdg checkpoint lib` and recapture",
                self.image.display()
            )));
        }
        Ok(())
    }

    /// Restore once with `control` on the control pipe (when the image has
    /// one); the copy's result pipe is drained while it runs, so a copy that
    /// takes many samples cannot fill it. `timeout` bounds each step: the
    /// restore up to the copy's first line, then each line to the next (a
    /// learning pass, a sample), so a copy taking many samples is stopped
    /// when one of them hangs, not after all of them could have run.
    pub(crate) fn run_restore(&self, control: &str, timeout: Duration) -> Result<RawRestore> {
        let (result_read, result_write) = pipe()?;
        let handed = self.descriptors_for_copy(result_write, control)?;
        let mut moves = descriptor_moves(&handed.passed);
        if let Some(tty) = handed.terminal.as_ref().and_then(|t| t.slave.as_ref()) {
            moves.push((tty.as_raw_fd(), 0));
        }
        let log_name = Self::new_log_name();
        let log = self.work.path().join(&log_name);
        let mut cmd = self.command(&log_name);
        let mut parked = vec![-1; moves.len()];
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || place_descriptors(&moves, &mut parked));
        }
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The limit is per sample: every line the copy writes (a learning
        // pass or a sample ended) starts it again.
        let deadline = toolchain::Deadline::fixed(Some(timeout));
        let drain = drain_results(result_read, done.clone(), deadline.clone());
        let started = Instant::now();
        let outcome = toolchain::run_with_deadline(&mut cmd, &deadline);
        let wall = started.elapsed();
        let HandedToCopy {
            passed,
            control_writer,
            made,
            terminal,
        } = handed;
        drop(passed);
        // The restore is over: every read end is closed, so a writer still
        // blocked gets EPIPE and ends. Its error matters only if the copy
        // reported nothing, which the caller diagnoses from the copy's side.
        if let Some(w) = control_writer {
            let _ = w.join();
        }
        drop(terminal);
        done.store(true, std::sync::atomic::Ordering::Release);
        let text = drain.join().unwrap_or_default();
        self.account(made, &text);
        tracing::trace!("what the restored copy reported:\n{text}");
        Ok(RawRestore {
            outcome,
            wall,
            text,
            log,
        })
    }

    /// What one restore hands its copy, in the order the restorer numbers
    /// them from RESULT_FD: the result pipe's write end, the control pipe's
    /// read end (when the image has one), each substitute, each relocated
    /// file; and the terminal, when the image needs one.
    fn descriptors_for_copy(&self, result_write: OwnedFd, control: &str) -> Result<HandedToCopy> {
        let mut passed: Vec<OwnedFd> = vec![result_write];
        let mut control_writer = None;
        if self.control_channel.is_some() {
            let tsc = self
                .tsc_ghz
                .map(|g| format!("tsc_ghz={g}\n"))
                .unwrap_or_default();
            tracing::trace!("what the restored copy is told:\n{tsc}{control}");
            let pipe = control_pipe(&format!("{tsc}{control}"))?;
            control_writer = pipe.writer;
            passed.push(pipe.read);
        }
        let mut made = Vec::new();
        for (i, s) in self.substitutes.iter().enumerate() {
            match &s.substitute {
                Substitute::DevNull => passed.push(open_dev_null()?),
                Substitute::Private(p) => {
                    let (fd, m) = self.make_private(i, p)?;
                    passed.push(fd);
                    made.push(m);
                }
            }
        }
        for r in &self.relocated {
            passed.push(open_image_file(&r.now)?);
        }
        let terminal = if self.needs_terminal {
            Some(Terminal::open()?)
        } else {
            None
        };
        Ok(HandedToCopy {
            passed,
            control_writer,
            made,
            terminal,
        })
    }

    /// Restore once, wait for the copy to finish its region, return its time.
    pub fn restore_once(
        &self,
        sample: usize,
        instructions: &CopyInstructions,
    ) -> Result<RestoredRun> {
        self.check_instructions(instructions)?;
        let RawRestore {
            outcome,
            wall,
            text,
            log,
        } = self.run_restore(&instructions.render(), self.timeout)?;
        let failed = |detail: String| CheckpointError::CopyFailed {
            image: self.image.clone(),
            sample,
            detail,
            log: Self::kept(&log),
        };
        let report = CopyReport::parse(&text);
        if let Some(e) = self.reported_failure(&report, sample, instructions, &log) {
            return Err(e);
        }
        let run = |(region_ns, region_cpu_ns)| RestoredRun {
            region_ns,
            region_cpu_ns,
            wall,
            outputs: report.outputs.clone(),
            minor_faults: report.minor_faults,
            phases: None,
            team: report.team,
            state: report.state,
            kept_log: self.keep_log.then(|| log.clone()),
        };
        match outcome {
            Ok(_) => match report.times {
                Some(times) => {
                    if !self.keep_log {
                        let _ = std::fs::remove_file(&log);
                    }
                    Ok(run(times))
                }
                None => Err(failed(
                    "exited without reporting a time (did it reach the end of the region?)".into(),
                )),
            },
            // The copy reported, then something after it failed.
            Err(toolchain::ToolchainError::Failed { ref stderr, .. })
                if report.times.is_some() && self.criu_log_error(stderr, &log).is_none() =>
            {
                Ok(run(report.times.expect("checked")))
            }
            Err(e) => Err(self.restorer_failed(e, sample, &log)),
        }
    }

    /// CRIU's own error from the restore's `log` (or its stderr), diagnosed.
    fn criu_log_error(&self, stderr: &str, log: &Path) -> Option<CheckpointError> {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        (text.contains("Error (") || stderr.contains("Error (")).then(|| CheckpointError::Criu {
            action: "restore",
            cause: diagnose_log(&format!("{text}\n{stderr}")),
            log: Self::kept(log),
        })
    }

    /// The restorer (unshare, criu, the copy) ended badly: why, in one
    /// line, naming the restore's `log`.
    pub(crate) fn restorer_failed(
        &self,
        e: toolchain::ToolchainError,
        sample: usize,
        log: &Path,
    ) -> CheckpointError {
        let failed = |detail: String| CheckpointError::CopyFailed {
            image: self.image.clone(),
            sample,
            detail,
            log: Self::kept(log),
        };
        match e {
            toolchain::ToolchainError::TimedOut { limit, .. } => failed(format!(
                "did not finish within {} and was killed with its PID namespace (nothing of it is left running); raise --timeout",
                toolchain::limit_text(&limit)
            )),
            toolchain::ToolchainError::Crashed { signal_name, .. } => {
                failed(format!("was killed by {signal_name}"))
            }
            toolchain::ToolchainError::Failed { code, stderr, .. } => {
                self.criu_log_error(&stderr, log).unwrap_or_else(|| {
                    failed(format!("exited with status {code} before the end of the region"))
                })
            }
            e => e.into(),
        }
    }
}

/// What one restore gave back: how the restorer ended, how long it took,
/// and everything the copy wrote on the result pipe.
pub(crate) struct RawRestore {
    pub outcome: std::result::Result<toolchain::RunOutput, toolchain::ToolchainError>,
    pub wall: Duration,
    pub text: String,
    /// CRIU's log of this restore.
    pub log: PathBuf,
}

/// A pseudo-terminal for a restored copy that held one. The master side is
/// drained by a thread so a chatty copy never blocks on a full terminal.
struct Terminal {
    slave: Option<OwnedFd>,
    drain: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    fn open() -> Result<Terminal> {
        let err = |what: &str| {
            io_err(format!("cannot allocate a pseudo-terminal ({what})"))(
                std::io::Error::last_os_error(),
            )
        };
        // SAFETY: standard pty allocation; every descriptor is checked and owned.
        unsafe {
            let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            if master < 0 {
                return Err(err("posix_openpt"));
            }
            let master = OwnedFd::from_raw_fd(master);
            if libc::grantpt(master.as_raw_fd()) < 0 || libc::unlockpt(master.as_raw_fd()) < 0 {
                return Err(err("unlockpt"));
            }
            let mut name = [0 as libc::c_char; 128];
            if libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) != 0 {
                return Err(err("ptsname"));
            }
            let slave = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if slave < 0 {
                return Err(err("open slave"));
            }
            let slave = OwnedFd::from_raw_fd(slave);
            let drain = std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                // Ends with EIO once every slave descriptor is closed.
                while libc::read(master.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) > 0 {}
            });
            Ok(Terminal {
                slave: Some(slave),
                drain: Some(drain),
            })
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Close the slave first so the drain thread sees EIO and ends.
        drop(self.slave.take());
        if let Some(t) = self.drain.take() {
            let _ = t.join();
        }
    }
}

impl RestorePlan {
    /// A copy that said why it could not run the candidate, or that caught a
    /// fatal signal: one line naming the candidate, the cause and the phase
    /// (the restore's `log` holds nothing more and is removed).
    pub(crate) fn reported_failure(
        &self,
        report: &CopyReport,
        sample: usize,
        instructions: &CopyInstructions,
        log: &Path,
    ) -> Option<CheckpointError> {
        let what = match &instructions.candidate {
            Some(c) => format!("candidate {}", c.source.display()),
            None => "the application's own code".to_string(),
        };
        let detail = if let Some(error) = &report.error {
            explain_copy_error(error)
        } else if let Some((signal, phase)) = &report.crash {
            format!(
                "was killed by {} in {phase}",
                toolchain::signal_name(*signal)
            )
        } else {
            return None;
        };
        let _ = std::fs::remove_file(log);
        let copy = if sample == 0 {
            "the verification copy".to_string()
        } else {
            format!("restored copy {sample}")
        };
        Some(CheckpointError::CopyReported {
            what,
            detail,
            copy,
            image: self.image.clone(),
        })
    }
}

/// dlopen's wording, turned into the cause and the way out.
fn explain_copy_error(error: &str) -> String {
    if let Some(symbol) = error.split("undefined symbol: ").nth(1) {
        let symbol = symbol.split_whitespace().next().unwrap_or(symbol);
        return format!(
            "uses `{symbol}`, which neither it nor the application exports \
             (define it in the candidate or an --extra file, or link the application with -rdynamic)"
        );
    }
    error.to_string()
}

/// Everything a copy writes on the result pipe.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyReport {
    /// `ns=<wall> cpu_ns=<cpu>`.
    pub times: Option<(u64, u64)>,
    /// `error=<why the copy could not run>`.
    pub error: Option<String>,
    /// `crash=<signal> phase=<phase>`.
    pub crash: Option<(i32, String)>,
    /// `output=<i> count=<n> size=<bytes> kind=<k>`, in order.
    pub outputs: Vec<OutputLayout>,
    /// `minflt=<n>` on the time line: minor faults inside the timed call.
    pub minor_faults: Option<u64>,
    /// `team ...`: the threads over the timed call (copies with threads).
    pub team: Option<TeamUse>,
    /// The state the timed call ran in, from the time line.
    pub state: Option<crate::fidelity::CallState>,
}

impl CopyReport {
    pub fn parse(text: &str) -> CopyReport {
        let mut report = CopyReport {
            times: crate::hostlib::parse_result(text),
            minor_faults: text
                .lines()
                .find(|l| l.starts_with("ns="))
                .and_then(|l| line_field(l, "minflt=")),
            team: text.lines().find_map(TeamUse::parse),
            state: text
                .lines()
                .find(|l| l.starts_with("ns="))
                .and_then(crate::fidelity::CallState::parse),
            ..Default::default()
        };
        let field = line_field;
        for line in text.lines() {
            if let Some(e) = line.strip_prefix("error=") {
                report.error = Some(e.to_string());
            } else if let Some(rest) = line.strip_prefix("crash=") {
                let (sig, phase) = rest.split_once(" phase=").unwrap_or((rest, "the region"));
                report.crash = Some((sig.trim().parse().unwrap_or(0), phase.to_string()));
            } else if line.starts_with("output=") {
                if let (Some(count), Some(elem_size), Some(kind)) = (
                    field(line, "count="),
                    field(line, "size="),
                    field(line, "kind="),
                ) {
                    report.outputs.push(OutputLayout {
                        count,
                        elem_size,
                        kind: kind as u32,
                    });
                }
            }
        }
        report
    }
}

/// The number after `key` among a result line's space-separated fields.
pub(crate) fn line_field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

/// The read end of a pipe carrying `text` to a restored copy, which reads
/// it to EOF. What fits in the pipe's buffer is written now; a longer text
/// (a schedule of thousands of samples, many candidates) is written by
/// `ControlPipe::writer` while the copy reads, and the write end closes
/// after the last byte.
struct ControlPipe {
    read: OwnedFd,
    writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// The descriptors one restore hands its copy ([`RestorePlan::descriptors_for_copy`]).
struct HandedToCopy {
    passed: Vec<OwnedFd>,
    control_writer: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    made: Vec<MadePrivate>,
    terminal: Option<Terminal>,
}

/// (descriptor here, number in the restorer): the result pipe and the
/// substitutes at RESULT_FD, RESULT_FD + 1, ...
fn descriptor_moves(passed: &[OwnedFd]) -> Vec<(i32, i32)> {
    passed
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_raw_fd(), RESULT_FD + i as i32))
        .collect()
}

/// Reads what the copy writes on its result pipe while it runs (so a copy
/// taking many samples cannot fill the pipe), counting each piece as
/// progress against `deadline`, until `done` is set; returns it all.
fn drain_results(
    result_read: OwnedFd,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    deadline: toolchain::Deadline,
) -> std::thread::JoinHandle<String> {
    // Woken only by data (poll), not by a timer: the restores of a
    // pinned comparison share one CPU with this thread.
    std::thread::spawn(move || {
        let mut text = String::new();
        loop {
            let finished = done.load(std::sync::atomic::Ordering::Acquire);
            let more = read_available(&result_read);
            if !more.is_empty() {
                deadline.progressed();
            }
            text.push_str(&more);
            if finished {
                break text;
            }
            let mut ready = libc::pollfd {
                fd: result_read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut ready, 1, 50) };
        }
    })
}

fn control_pipe(text: &str) -> Result<ControlPipe> {
    let (read, write) = pipe()?;
    let bytes = text.as_bytes();
    // SAFETY: fcntl on a descriptor we own.
    let capacity = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
    let now = bytes
        .len()
        .min(usize::try_from(capacity).unwrap_or(4096).max(4096));
    // Within the pipe's capacity, so this write does not block (the pipe
    // is non-blocking: a short count is an error, not a wait).
    // SAFETY: bytes is valid for `now` bytes; write is a plain descriptor write.
    let n = unsafe { libc::write(write.as_raw_fd(), bytes.as_ptr().cast(), now) };
    if n != now as isize {
        return Err(std::io::Error::last_os_error())
            .map_err(io_err("cannot fill the control pipe"));
    }
    // The copy blocks on it until EOF: make both ends blocking again.
    // SAFETY: fcntl on descriptors we own.
    unsafe {
        libc::fcntl(read.as_raw_fd(), libc::F_SETFL, 0);
        libc::fcntl(write.as_raw_fd(), libc::F_SETFL, 0);
    }
    let writer = (now < bytes.len()).then(|| {
        let rest = bytes[now..].to_vec();
        std::thread::spawn(move || {
            use std::io::Write;
            // Ends with EPIPE if the copy dies before reading it all.
            std::fs::File::from(write).write_all(&rest)
        })
    });
    Ok(ControlPipe { read, writer })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error())
            .map_err(io_err("cannot create the result pipe"));
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A file of the image (its directory, the shim), read-only and never
/// through a link.
fn open_image_file(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(format!("cannot open {}", path.display())))?;
    Ok(f.into())
}

fn open_dev_null() -> Result<OwnedFd> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(io_err("cannot open /dev/null"))?;
    Ok(f.into())
}

/// Puts each `(from, to)` descriptor at number `to`, in a forked child. All
/// sources go to high numbers first: a source may sit at another's target
/// (the parent's pseudo-terminal at 4, say, where the second substitute goes),
/// and moving them in one pass would overwrite it before it is moved.
/// `parked` (as long as `moves`, allocated before the fork) holds the high
/// numbers: no allocation between fork and exec.
fn place_descriptors(moves: &[(i32, i32)], parked: &mut [i32]) -> std::io::Result<()> {
    debug_assert_eq!(moves.len(), parked.len());
    for (slot, &(from, _)) in parked.iter_mut().zip(moves) {
        // SAFETY: plain descriptor duplication.
        *slot = unsafe { libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 512) };
        if *slot < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    for (&h, &(_, to)) in parked.iter().zip(moves) {
        // SAFETY: dup2 onto a descriptor number we reserve for the restorer.
        if unsafe { libc::dup2(h, to) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn read_available(fd: &OwnedFd) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        // SAFETY: buf is valid for its length; fd is non-blocking.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    String::from_utf8_lossy(&out).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Control text far past a pipe's buffer (a million-sample schedule is
    /// 2 MB) reaches the reader whole, then EOF; so does a short one.
    #[test]
    fn control_text_of_any_length_arrives_whole() {
        use std::io::Read;
        for len in [100usize, 3 << 20] {
            let text: String = (0..len)
                .map(|i| if i % 2 == 0 { '0' } else { ',' })
                .collect();
            let pipe = control_pipe(&text).unwrap();
            assert_eq!(pipe.writer.is_some(), len > 65536);
            let mut got = String::new();
            std::fs::File::from(pipe.read)
                .read_to_string(&mut got)
                .unwrap();
            assert_eq!(got.len(), len);
            assert!(got == text);
            if let Some(w) = pipe.writer {
                w.join().unwrap().unwrap();
            }
        }
    }

    /// The terminal's descriptor sits at 4, the second substitute's target:
    /// moving in one pass put `/dev/null` on the restorer's stdin (a CI run:
    /// "Don't have tty to inherit session from").
    #[test]
    fn descriptors_sitting_at_each_others_targets_all_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            (std::fs::File::open(&path).unwrap(), path)
        };
        let (result, result_path) = open("result");
        let (substitute, substitute_path) = open("substitute");
        let (terminal, terminal_path) = open("terminal");
        // Well away from 0-4, so only the collision set up below happens.
        let high = |f: &std::fs::File| unsafe {
            OwnedFd::from_raw_fd(libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100))
        };
        let owned = [high(&result), high(&substitute), high(&terminal)];
        let [result, substitute, terminal] = owned.each_ref().map(|f| f.as_raw_fd());
        let moves = vec![(result, 3), (substitute, 4), (4, 0)];
        let mut parked = vec![-1; moves.len()];
        let mut cmd = Command::new("readlink");
        cmd.args(["/proc/self/fd/0", "/proc/self/fd/3", "/proc/self/fd/4"]);
        // SAFETY: dup2 and fcntl only, in the child.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(terminal, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                place_descriptors(&moves, &mut parked)
            });
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let got: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, [terminal_path, result_path, substitute_path]);
    }
}
