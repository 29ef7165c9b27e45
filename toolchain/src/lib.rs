//! The system C toolchain as tdg uses it: find a compiler, compile a set of
//! sources into an executable or object, run a program and say in one line
//! how it ended (exit code or the signal that killed it).

pub mod build_cache;

pub use build_cache::{BuildCache, Compiled};

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error("no C compiler found (tried {tried}); install gcc (`apt-get install gcc`) or pass --cc / set CC")]
    NoCompiler { tried: String },
    #[error("C compiler `{cc}` could not be started: {source}")]
    Spawn {
        cc: String,
        #[source]
        source: std::io::Error,
    },
    #[error("compilation failed: {command}\n{stderr}")]
    BuildFailed { command: String, stderr: String },
    #[error("`{program}` could not be started: {source}")]
    RunSpawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` was killed by {signal_name} (signal {signal}){context}")]
    Crashed {
        program: String,
        signal: i32,
        signal_name: &'static str,
        /// What the program last said on stderr, prefixed with "; " when present.
        context: String,
        stdout: String,
        stderr: String,
    },
    #[error("`{program}` exited with status {code}: {stderr}")]
    Failed {
        program: String,
        code: i32,
        stdout: String,
        stderr: String,
    },
    #[error("`{program}` did not finish within {} and was killed with every process it started (its process group); raise the time limit (--timeout) if it needs longer", limit_text(.limit))]
    TimedOut { program: String, limit: Duration },
    /// The build cache cannot be used; the message names the way out.
    #[error("{0}")]
    Cache(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A file or directory tdg writes (fsguard's message names the path:
    /// a directory tdg refuses to write into, or the call that failed).
    #[error("{0}")]
    Files(std::io::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompilerKind {
    Gcc,
    Clang,
    Other,
}

/// Compilers found in this process, by (`--cc`, `$CC`).
type Found = HashMap<(Option<String>, Option<String>), CCompiler>;

/// A C compiler that answered `--version`.
#[derive(Debug, Clone)]
pub struct CCompiler {
    pub program: String,
    pub kind: CompilerKind,
    /// First line of `--version`.
    pub version: String,
    /// What a compiled object depends on besides its inputs: the version
    /// line, the executable `program` resolves to, and that file's size
    /// and modification time (an upgraded compiler keeps its version line
    /// across a rebuild of the same release).
    pub identity: String,
}

impl CCompiler {
    /// `explicit` (from `--cc`) first, then `$CC`, then `cc`, `gcc`, `clang`.
    ///
    /// Asked once per process for each choice: a tuning search builds a
    /// driver per configuration, and `--version` of the same compiler says
    /// the same thing every time.
    pub fn find(explicit: Option<&str>) -> Result<CCompiler, ToolchainError> {
        static FOUND: std::sync::Mutex<Option<Found>> = std::sync::Mutex::new(None);
        let choice = (
            explicit.map(str::to_string),
            std::env::var("CC").ok().filter(|_| explicit.is_none()),
        );
        if let Some(cc) = FOUND
            .lock()
            .ok()
            .and_then(|m| m.as_ref().and_then(|m| m.get(&choice).cloned()))
        {
            return Ok(cc);
        }
        let cc = Self::find_uncached(explicit)?;
        if let Ok(mut m) = FOUND.lock() {
            m.get_or_insert_with(HashMap::new)
                .insert(choice, cc.clone());
        }
        Ok(cc)
    }

    fn find_uncached(explicit: Option<&str>) -> Result<CCompiler, ToolchainError> {
        let mut candidates: Vec<String> = Vec::new();
        if let Some(cc) = explicit {
            candidates.push(cc.to_string());
        } else {
            if let Ok(cc) = std::env::var("CC") {
                if !cc.trim().is_empty() {
                    candidates.push(cc);
                }
            }
            candidates.extend(["cc", "gcc", "clang"].iter().map(|s| s.to_string()));
        }
        for cand in &candidates {
            if let Some(cc) = Self::probe(cand) {
                return Ok(cc);
            }
        }
        Err(ToolchainError::NoCompiler {
            tried: candidates.join(", "),
        })
    }

    fn probe(program: &str) -> Option<CCompiler> {
        let out = Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let version = text.lines().next().unwrap_or("").to_string();
        let kind = if text.contains("clang") {
            CompilerKind::Clang
        } else if text.contains("gcc") || text.contains("GCC") || text.contains("Free Software") {
            CompilerKind::Gcc
        } else {
            CompilerKind::Other
        };
        let identity = match resolve_program(program).and_then(|p| {
            let m = std::fs::metadata(&p).ok()?;
            Some((p, m))
        }) {
            Some((path, m)) => {
                use std::os::unix::fs::MetadataExt;
                format!(
                    "{version}\n{}\n{} bytes, modified {}.{}",
                    path.display(),
                    m.len(),
                    m.mtime(),
                    m.mtime_nsec()
                )
            }
            None => format!("{version}\n{program}"),
        };
        Some(CCompiler {
            program: program.to_string(),
            kind,
            version,
            identity,
        })
    }

    /// Runs one compiler invocation; on failure the error carries the
    /// compiler's own diagnostics verbatim.
    pub fn compile(&self, job: &CompileJob) -> Result<(), ToolchainError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&job.cflags);
        for (name, value) in &job.defines {
            match value {
                Some(v) => cmd.arg(format!("-D{name}={v}")),
                None => cmd.arg(format!("-D{name}")),
            };
        }
        for dir in &job.include_dirs {
            cmd.arg("-I").arg(dir);
        }
        if job.object_only {
            cmd.arg("-c");
        }
        cmd.args(&job.sources);
        cmd.arg("-o").arg(&job.output);
        cmd.args(&job.link_args);
        let command = render_command(&cmd);
        tracing::debug!(%command, "compiling");
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|source| ToolchainError::Spawn {
                cc: self.program.clone(),
                source,
            })?;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() {
            return Err(ToolchainError::BuildFailed { command, stderr });
        }
        if !stderr.trim().is_empty() {
            tracing::warn!("compiler warnings:\n{stderr}");
        }
        Ok(())
    }
}

/// The file `program` runs: itself when it names a path, else the first
/// executable of that name on `PATH`, with symbolic links resolved (`cc`
/// is usually a chain of them).
fn resolve_program(program: &str) -> Option<PathBuf> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
        })
    }?;
    std::fs::canonicalize(found).ok()
}

/// One compiler invocation.
#[derive(Debug, Clone, Default)]
pub struct CompileJob {
    pub sources: Vec<PathBuf>,
    pub output: PathBuf,
    pub cflags: Vec<String>,
    /// `-DNAME` or `-DNAME=VALUE`.
    pub defines: Vec<(String, Option<String>)>,
    pub include_dirs: Vec<PathBuf>,
    /// Libraries and linker flags; placed after the sources.
    pub link_args: Vec<String>,
    /// `-c`: produce an object file.
    pub object_only: bool,
}

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

/// Shell-like rendering of a command, for messages and logs.
pub fn render_command(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().to_string()];
    parts.extend(cmd.get_args().map(|a| {
        let s = a.to_string_lossy();
        if s.contains(' ') || s.is_empty() {
            format!("'{s}'")
        } else {
            s.to_string()
        }
    }));
    parts.join(" ")
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

/// A time limit as messages print it: whole seconds, or milliseconds below one.
pub fn limit_text(limit: &Duration) -> String {
    if limit.as_millis() < 1000 {
        format!("{} ms", limit.as_millis())
    } else if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{:.1} s", limit.as_secs_f64())
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
    fn build_failure_carries_compiler_message() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("bad.c");
        std::fs::write(&src, "int main(void){ return undeclared_thing; }\n").unwrap();
        let err = cc()
            .compile(&CompileJob {
                sources: vec![src],
                output: dir.path().join("bad"),
                ..Default::default()
            })
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("undeclared_thing"), "{msg}");
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

    #[test]
    fn missing_compiler_says_how_to_fix() {
        let err = CCompiler::find(Some("/nonexistent/cc")).unwrap_err();
        assert!(err.to_string().contains("apt-get install gcc"));
    }
}
