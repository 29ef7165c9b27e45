//! The system C toolchain as tdg uses it: find a compiler, compile a set of
//! sources into an executable or object, run a program and say in one line
//! how it ended (exit code or the signal that killed it).

pub mod build_cache;
mod compiler;
mod error;

pub use build_cache::{BuildCache, Compiled};
pub use compiler::{render_command, CCompiler, CompileJob, CompilerKind};
pub use error::{limit_text, ToolchainError};

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The link-time address of the function or object `name` in the ELF file
/// `path`, from its symbol table (`None`: no such defined symbol, or not an
/// ELF file). A position-independent executable is loaded at a page-aligned
/// base, so the address modulo the page size holds at run time too.
pub fn symbol_address(path: &Path, name: &str) -> Result<Option<u64>, ToolchainError> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path)?;
    let Ok(file) = object::File::parse(&*data) else {
        return Ok(None);
    };
    Ok(file
        .symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .map(|s| s.address()))
}

/// Where the function `name` starts within the `.text` section of the
/// relocatable object `path` (`None`: not defined there, or defined in
/// another section, which the linker may move away from the object's
/// `.text`).
pub fn offset_in_text(path: &Path, name: &str) -> Result<Option<u64>, ToolchainError> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(path)?;
    let Ok(file) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(symbol) = file
        .symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
    else {
        return Ok(None);
    };
    let in_text = symbol
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .is_some_and(|s| s.name() == Ok(".text"));
    Ok(in_text.then(|| symbol.address()))
}

/// What a finished program printed.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub stdout: String,
    pub stderr: String,
    pub status: ExitStatus,
    pub elapsed: Duration,
}

/// Runs `cmd` to completion with stdout/stderr captured and an optional time
/// limit. A non-zero exit or a fatal signal becomes an error that says which.
///
/// The program leads a process group of its own, so that a limit ends
/// everything it started (a shell's children, a restore's `unshare`), not
/// just the process tdg forked; out of tdg's group the terminal's Ctrl-C no
/// longer reaches it, so it is tied to tdg instead (killed if tdg dies).
pub fn run(cmd: &mut Command, timeout: Option<Duration>) -> Result<RunOutput, ToolchainError> {
    let program = cmd.get_program().to_string_lossy().to_string();
    let started = Instant::now();
    let tdg = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: prctl, getppid and raise are async-signal-safe; nothing else
    // runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != tdg {
                // tdg died before the death signal was armed.
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
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
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let Some(status) = wait_or_kill_group(&mut child, timeout)? else {
        // The pipes close with the group; a process that left it (its own
        // session) may hold them open, so the output is not waited for.
        return Err(ToolchainError::TimedOut {
            program,
            limit: timeout.unwrap_or_default(),
        });
    };
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).to_string();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).to_string();
    check_status(&program, status, stdout, stderr, elapsed)
}

/// Waits for `child`, which leads its own process group, for at most
/// `limit`; past it, kills the whole group with SIGKILL, reaps the child
/// and returns `None`. The wait sleeps in the kernel (poll on a pidfd,
/// readable when the child exits) rather than waking every few
/// milliseconds: the timed program may share its CPU with tdg.
pub fn wait_or_kill_group(
    child: &mut Child,
    limit: Option<Duration>,
) -> std::io::Result<Option<ExitStatus>> {
    if let Some(limit) = limit {
        if !exits_within(child, limit)? {
            let pid = child.id() as libc::pid_t;
            // SAFETY: plain kill(2) calls. The child is not reaped yet, so
            // its pid (and the group id it leads) cannot have been reused.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
            child.wait()?;
            return Ok(None);
        }
    }
    child.wait().map(Some)
}

/// Whether `child` exits within `limit` (it is not reaped).
fn exits_within(child: &mut Child, limit: Duration) -> std::io::Result<bool> {
    let deadline = Instant::now() + limit;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    if raw < 0 {
        // Kernels before 5.3 have no pidfd: poll the child, backing off.
        let mut nap = Duration::from_millis(1);
        loop {
            if child.try_wait()?.is_some() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(50));
        }
    }
    // SAFETY: pidfd_open returned a fresh descriptor we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let mut ready = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut ready, 1, ms) } {
            n if n > 0 => return Ok(true),
            0 if Instant::now() >= deadline => return Ok(false),
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

fn check_status(
    program: &str,
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
) -> Result<RunOutput, ToolchainError> {
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

/// The `LD_PRELOAD` value that puts `shim` first, ahead of whatever this
/// process's own `LD_PRELOAD` already holds (kept, not replaced).
pub fn ld_preload_with(shim: &std::path::Path) -> OsString {
    let mut value = OsString::from(shim);
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// Scratch directories are private (0700) with unpredictable names; they
/// live in `fsguard` with tdg's other rules for touching the filesystem.
pub use fsguard::{scratch_dir, ScratchDir};

/// Convenience for building argument lists.
pub fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc() -> CCompiler {
        CCompiler::find(None).expect("a C compiler is installed")
    }

    #[test]
    fn compiles_and_runs_a_program() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("p.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\nint main(void){printf(\"%d\\n\", V);return 0;}\n",
        )
        .unwrap();
        let exe = dir.path().join("p");
        cc().compile(&CompileJob {
            sources: vec![src],
            output: exe.clone(),
            cflags: vec!["-O2".into()],
            defines: vec![("V".into(), Some("42".into()))],
            ..Default::default()
        })
        .unwrap();
        let out = run(&mut Command::new(&exe), Some(Duration::from_secs(10))).unwrap();
        assert_eq!(out.stdout.trim(), "42");
    }

    #[test]
    fn crash_is_reported_with_signal_and_last_words() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("crash.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\n#include <signal.h>\nint main(void){fprintf(stderr,\"calling kernel\\n\");raise(SIGSEGV);return 0;}\n",
        )
        .unwrap();
        let exe = dir.path().join("crash");
        cc().compile(&CompileJob {
            sources: vec![src],
            output: exe.clone(),
            ..Default::default()
        })
        .unwrap();
        let err = run(&mut Command::new(&exe), None).unwrap_err();
        match &err {
            ToolchainError::Crashed { signal, .. } => assert_eq!(*signal, libc::SIGSEGV),
            other => panic!("expected a crash, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains("SIGSEGV") && msg.contains("calling kernel"),
            "{msg}"
        );
    }

    #[test]
    fn timeout_kills_the_child() {
        let err = run(
            Command::new("sleep").arg("5"),
            Some(Duration::from_millis(100)),
        )
        .unwrap_err();
        assert!(matches!(err, ToolchainError::TimedOut { .. }));
    }

    fn alive(pid: i32) -> bool {
        // A zombie is dead: only its parent's wait is missing.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    }

    /// A program that started others (a shell's background job, here) is
    /// killed with all of them, and the message says so with the limit.
    #[test]
    fn timeout_kills_everything_the_program_started_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let started = Instant::now();
        let err = run(
            Command::new("sh").arg("-c").arg(&script),
            Some(Duration::from_millis(300)),
        )
        .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the wait outlived the limit"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("within 300 ms")
                && msg.contains("process group")
                && msg.contains("--timeout"),
            "{msg}"
        );
        let grandchild: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !alive(grandchild),
            "the shell's child {grandchild} outlived the timeout"
        );
    }
}
