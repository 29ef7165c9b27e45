//! Running a program as every crate of tdg does: in a process group of its
//! own, tied to tdg, waited for on a pidfd, and bounded. A time limit ends
//! the whole group; so does a normal exit, so nothing the program left
//! behind runs on as root, and a leftover holding the program's output
//! pipes open cannot make tdg wait for it.

use crate::error::ToolchainError;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest time limit tdg accepts for any of its `--timeout` options:
/// a week. Longer is a typo or a wish for no limit, and a limit past what
/// the clock can represent would overflow where the deadline is computed.
pub const MAX_TIME_LIMIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Conventional name of a signal number ("SIGSEGV").
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGSYS => "SIGSYS",
        _ => "an unknown signal",
    }
}

/// A time limit in whole seconds as the command line gives it (clap's
/// `value_parser`): at least 1, at most [`MAX_TIME_LIMIT`]; anything else is
/// a usage error that says the range.
pub fn time_limit_secs(text: &str) -> Result<u64, String> {
    let max = MAX_TIME_LIMIT.as_secs();
    let digits = text.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "`{text}` is not a whole number of seconds (1 to {max})"
        ));
    }
    match digits.parse::<u64>() {
        Ok(0) => Err(format!(
            "a limit of 0 seconds would stop every run at once; give 1 to {max} seconds"
        )),
        Ok(secs) if secs <= max => Ok(secs),
        _ => Err(format!(
            "{digits} seconds is above the longest limit tdg accepts, {max} seconds (7 days); give 1 to {max} seconds"
        )),
    }
}

/// When a program is stopped: `limit` after it started, or, once
/// [`progressed`](Self::progressed) is called, `limit` after the last call
/// (a restored copy taking many samples reports each one, and the limit is
/// each sample's). `None`: never.
#[derive(Debug, Clone)]
pub struct Deadline {
    start: Instant,
    limit: Option<Duration>,
    /// Nanoseconds from `start` to the last progress.
    last_progress_ns: Arc<AtomicU64>,
}

impl Deadline {
    /// `limit` from now, or never.
    pub fn fixed(limit: Option<Duration>) -> Deadline {
        Deadline {
            start: Instant::now(),
            limit,
            last_progress_ns: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The program showed progress: its limit starts again from now.
    pub fn progressed(&self) {
        let ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_progress_ns.fetch_max(ns, Ordering::AcqRel);
    }

    pub fn limit(&self) -> Option<Duration> {
        self.limit
    }

    /// The instant the program is stopped at (None: never, or later than
    /// the clock can say, which is the same).
    fn at(&self) -> Option<Instant> {
        let last = Duration::from_nanos(self.last_progress_ns.load(Ordering::Acquire));
        self.start.checked_add(last)?.checked_add(self.limit?)
    }
}

/// What a finished program printed.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub stdout: String,
    pub stderr: String,
    pub status: ExitStatus,
    pub elapsed: Duration,
    /// Processes the program left running in its process group when it
    /// exited (`comm` names), which tdg killed.
    pub leftovers: Vec<String>,
}

/// How a program waited for by [`wait_or_kill_group`] ended.
#[derive(Debug, Clone)]
pub struct Finished {
    pub status: ExitStatus,
    /// What it left running in its process group, killed (`comm` names).
    pub leftovers: Vec<String>,
}

/// Runs `cmd` to completion with stdout/stderr captured and an optional time
/// limit. A non-zero exit or a fatal signal becomes an error that says which.
///
/// The program leads a process group of its own, so that a limit ends
/// everything it started (a shell's children, a restore's `unshare`), not
/// just the process tdg forked; out of tdg's group the terminal's Ctrl-C no
/// longer reaches it, so it is tied to tdg instead (killed if tdg dies).
pub fn run(cmd: &mut Command, timeout: Option<Duration>) -> Result<RunOutput, ToolchainError> {
    run_with_deadline(cmd, &Deadline::fixed(timeout))
}

/// How long the output of a program that exited is waited for once its
/// process group is gone: only a process that left the group (a daemon in a
/// session of its own) can still hold the pipes open, and it is not waited for.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// Between fork and exec, in the child: it is killed when tdg dies
/// (`PR_SET_PDEATHSIG`), and at once if tdg died before that was armed, so
/// nothing tdg started runs on as root unwatched. `tdg` is tdg's pid, read
/// before the fork. Only async-signal-safe calls (prctl, getppid, raise).
pub fn die_with_tdg(tdg: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: plain system calls on this process, no memory handed over.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != tdg {
            libc::raise(libc::SIGKILL);
        }
    }
    Ok(())
}

/// `cmd`'s program leads a process group of its own (so a time limit stops
/// all it started) and dies with tdg ([`die_with_tdg`]).
pub fn tie_to_tdg(cmd: &mut Command) -> &mut Command {
    let tdg = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: die_with_tdg makes only async-signal-safe calls; nothing else
    // runs between fork and exec.
    unsafe { cmd.pre_exec(move || die_with_tdg(tdg)) }
}

/// [`run`] with a deadline the caller may push back while the program
/// shows progress ([`Deadline::progressed`]).
pub fn run_with_deadline(
    cmd: &mut Command,
    deadline: &Deadline,
) -> Result<RunOutput, ToolchainError> {
    let program = cmd.get_program().to_string_lossy().to_string();
    let started = Instant::now();
    tie_to_tdg(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ToolchainError::RunSpawn {
            program: program.clone(),
            source,
        })?;
    // Drain both pipes on threads so a chatty child cannot block on a full pipe.
    let out = Drain::start(child.stdout.take().expect("piped"));
    let err = Drain::start(child.stderr.take().expect("piped"));
    let Some(finished) = wait_with_deadline(&mut child, deadline)? else {
        // The pipes close with the group; a process that left it (its own
        // session) may hold them open, so the output is not waited for.
        return Err(ToolchainError::TimedOut {
            program,
            limit: deadline.limit.unwrap_or_default(),
        });
    };
    let elapsed = started.elapsed();
    let grace = Instant::now() + OUTPUT_GRACE;
    let (stdout, out_whole) = out.finish(grace);
    let (stderr, err_whole) = err.finish(grace);
    if !finished.leftovers.is_empty() {
        tracing::warn!(
            "`{program}` exited and left {} running in its process group; tdg killed {} (nothing it starts outlives it)",
            finished.leftovers.join(", "),
            if finished.leftovers.len() == 1 { "it" } else { "them" }
        );
    }
    if !(out_whole && err_whole) {
        tracing::warn!(
            "`{program}` exited but a process outside its process group still holds its output open; \
             its output after {} is not waited for",
            crate::error::limit_text(&OUTPUT_GRACE)
        );
    }
    check_status(&program, finished, stdout, stderr, elapsed)
}

/// One output pipe read to its end on a thread, into a buffer the caller
/// can take whole or, past a bound, as far as it got.
struct Drain {
    text: Arc<Mutex<Vec<u8>>>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Drain {
    fn start(mut pipe: impl Read + Send + 'static) -> Drain {
        let text = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = std::sync::mpsc::channel();
        let into = text.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => into
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
        Drain { text, done }
    }

    /// The text, and whether the pipe reached its end by `until`.
    fn finish(self, until: Instant) -> (String, bool) {
        let whole = self
            .done
            .recv_timeout(until.saturating_duration_since(Instant::now()))
            .is_ok();
        let bytes = self.text.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (String::from_utf8_lossy(&bytes).to_string(), whole)
    }
}

/// Waits for `child`, which leads its own process group, for at most
/// `limit`; past it, kills the whole group with SIGKILL, reaps the child
/// and returns `None`. When the child exits in time, whatever it left
/// running in its group is killed too (and named), before it is reaped.
/// The wait sleeps in the kernel (poll on a pidfd, readable when the child
/// exits) rather than waking every few milliseconds: the timed program may
/// share its CPU with tdg.
pub fn wait_or_kill_group(
    child: &mut Child,
    limit: Option<Duration>,
) -> std::io::Result<Option<Finished>> {
    wait_with_deadline(child, &Deadline::fixed(limit))
}

fn wait_with_deadline(child: &mut Child, deadline: &Deadline) -> std::io::Result<Option<Finished>> {
    let pid = child.id() as libc::pid_t;
    let exited = exits_by(child, deadline)?;
    // The child is not reaped yet, so its pid (and the group id it leads)
    // cannot have been reused: killing the group reaches only what it started.
    let leftovers = if exited {
        group_members(pid)
    } else {
        Vec::new()
    };
    // SAFETY: plain kill(2) calls on the group the child leads and the child.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        if !exited {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let status = child.wait()?;
    wait_until_gone(pid, Duration::from_secs(5));
    Ok(exited.then_some(Finished { status, leftovers }))
}

/// The `comm` names of the live processes in process group `pgid` other
/// than its leader.
fn group_members(pgid: libc::pid_t) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&p| p != pgid)
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let _ppid = fields.next()?;
            let pgrp: libc::pid_t = fields.next()?.parse().ok()?;
            let name = head.split_once('(')?.1;
            (pgrp == pgid && state != "Z" && state != "X").then(|| name.to_string())
        })
        .collect()
}

/// Waits (briefly, polling) until no live process is left in group `pgid`:
/// a SIGKILL takes effect when the process next runs, and "killed" should
/// mean gone when tdg says so.
fn wait_until_gone(pgid: libc::pid_t, bound: Duration) {
    let until = Instant::now() + bound;
    let mut nap = Duration::from_micros(200);
    while !group_members(pgid).is_empty() && Instant::now() < until {
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    }
}

/// Whether `child` exits before `deadline` (it is not reaped).
fn exits_by(child: &mut Child, deadline: &Deadline) -> std::io::Result<bool> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    if raw < 0 {
        return exits_by_polling(child, deadline);
    }
    // SAFETY: pidfd_open returned a fresh descriptor we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    loop {
        let ms = match deadline.at() {
            None => -1,
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
            }
        };
        let mut ready = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut ready, 1, ms) } {
            n if n > 0 => return Ok(true),
            // The deadline may have moved while poll slept: judge it again.
            0 if deadline.at().is_some_and(|at| Instant::now() >= at) => return Ok(false),
            0 => continue,
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Kernels before 5.3 have no pidfd: poll the child without reaping it
/// (`waitid` with `WNOWAIT`), backing off.
fn exits_by_polling(child: &mut Child, deadline: &Deadline) -> std::io::Result<bool> {
    let mut nap = Duration::from_millis(1);
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child; WNOWAIT leaves it unreaped.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is valid to read after a successful waitid.
        if rc == 0 && unsafe { info.si_pid() } != 0 {
            return Ok(true);
        }
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let now = Instant::now();
        match deadline.at() {
            Some(at) if now >= at => return Ok(false),
            Some(at) => std::thread::sleep(nap.min(at - now)),
            None => std::thread::sleep(nap),
        }
        nap = (nap * 2).min(Duration::from_millis(50));
    }
}

fn check_status(
    program: &str,
    finished: Finished,
    stdout: String,
    stderr: String,
    elapsed: Duration,
) -> Result<RunOutput, ToolchainError> {
    let Finished { status, leftovers } = finished;
    if let Some(signal) = status.signal() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let context = last.map(|l| format!("; {}", l.trim())).unwrap_or_default();
        return Err(ToolchainError::Crashed {
            program: program.to_string(),
            signal,
            signal_name: signal_name(signal),
            context,
            stdout,
            stderr,
        });
    }
    match status.code() {
        Some(0) => Ok(RunOutput {
            stdout,
            stderr,
            status,
            elapsed,
            leftovers,
        }),
        Some(code) => Err(ToolchainError::Failed {
            program: program.to_string(),
            code,
            stdout,
            stderr,
        }),
        None => unreachable!("a process without an exit code was signalled"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_are_whole_seconds_within_a_week() {
        assert_eq!(time_limit_secs("600"), Ok(600));
        assert_eq!(time_limit_secs("604800"), Ok(604800));
        for bad in [
            "0",
            "604801",
            "18446744073709551615",
            "99999999999999999999999",
        ] {
            let e = time_limit_secs(bad).unwrap_err();
            assert!(e.contains("1 to 604800 seconds"), "{bad}: {e}");
        }
        assert!(time_limit_secs("18446744073709551615")
            .unwrap_err()
            .contains("above the longest limit"));
        for bad in ["", "-1", "1.5", "ten"] {
            assert!(
                time_limit_secs(bad).unwrap_err().contains("whole number"),
                "{bad}"
            );
        }
    }

    /// No limit and the largest one the clock cannot represent both mean
    /// "wait": neither panics computing a deadline.
    #[test]
    fn a_limit_past_the_clock_waits_instead_of_overflowing() {
        let out = run(
            Command::new("true").arg("x"),
            Some(Duration::from_secs(u64::MAX)),
        )
        .unwrap();
        assert!(out.status.success());
        let d = Deadline::fixed(Some(Duration::MAX));
        assert!(d.at().is_none());
    }

    /// `sh -c 'app; sleep 1000 &'`: the shell exits at once, its
    /// background job holds the output pipes and would run on as root.
    /// The run returns when the shell exits, the job is killed and named.
    #[test]
    fn a_normal_exit_kills_what_the_program_left_in_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("leftover");
        let script = format!("echo out; sleep 1000 & echo $! > {}", pidfile.display());
        let started = Instant::now();
        let out = run(
            Command::new("sh").arg("-c").arg(&script),
            Some(Duration::from_secs(60)),
        )
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(out.stdout.trim(), "out");
        // Named as it is when killed: `sleep`, or `sh` when the shell's
        // fork had not yet exec'd it.
        assert!(
            out.leftovers == ["sleep"] || out.leftovers == ["sh"],
            "{:?}",
            out.leftovers
        );
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!testkit::alive(pid), "the leftover {pid} is still running");
        // A program that leaves nothing has nothing named.
        let out = run(Command::new("true").arg("x"), Some(Duration::from_secs(60))).unwrap();
        assert!(out.leftovers.is_empty());
    }

    /// A deadline pushed back by progress lets a program run longer than
    /// its limit in all, as long as no step takes longer than the limit.
    #[test]
    fn progress_pushes_the_deadline_back() {
        let deadline = Deadline::fixed(Some(Duration::from_millis(400)));
        let ticker = deadline.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let t = std::thread::spawn(move || {
            while !stopping.load(Ordering::Acquire) {
                ticker.progressed();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let started = Instant::now();
        let out = run_with_deadline(Command::new("sleep").arg("1"), &deadline);
        stop.store(true, Ordering::Release);
        t.join().unwrap();
        assert!(out.is_ok(), "{out:?}");
        assert!(started.elapsed() >= Duration::from_secs(1));
        // Without progress the same limit ends it.
        let started = Instant::now();
        let e = run_with_deadline(
            Command::new("sleep").arg("5"),
            &Deadline::fixed(Some(Duration::from_millis(400))),
        )
        .unwrap_err();
        assert!(matches!(e, ToolchainError::TimedOut { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(4));
    }
}
