//! `tdg profile -- CMD`: run a program with profiling on and collect what
//! every one of its processes recorded into one profile.

use crate::format::{self, Profile};
use crate::runtime;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no command to profile: give it after `--`, e.g. `tdg profile --spec crc32.spec -- ./app args`")]
    NoCommand,
    #[error("`{program}` could not be started: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` ran longer than {limit:?} under the profiling shim and was stopped with everything it started; raise --timeout if it needs longer")]
    TimedOut {
        program: String,
        limit: std::time::Duration,
    },
    #[error("{}", unresolved_explanation(.0))]
    Unresolved(String),
    #[error("{0}")]
    NoProfile(String),
    #[error("{0}")]
    BadSettings(String),
    #[error(transparent)]
    Format(#[from] format::FormatError),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// How the runtime inside the program is configured (environment).
#[derive(Debug, Clone, Default)]
pub struct RuntimeSettings {
    /// `TDG_PROFILE_CALLS`: expected calls per routine.
    pub calls: Option<u64>,
    /// `TDG_PROFILE_RECORDS`: buffer size in records (overrides `calls`).
    pub records: Option<u64>,
    /// `TDG_PROFILE_STORES=cached`: ordinary stores instead of movnti.
    pub cached_stores: bool,
}

/// Bytes of one record in the runtime's buffer (format::RECORD_SIZE).
const RECORD_BYTES: u64 = crate::format::RECORD_SIZE as u64;

impl RuntimeSettings {
    /// The runtime silently falls back to its default for a zero size, and
    /// a size whose byte count overflows would wrap inside it: refuse both
    /// here, and a buffer larger than the machine's memory, with the way out.
    pub fn check(&self, mem_total_bytes: Option<u64>) -> Result<(), SessionError> {
        for (flag, value) in [("--calls", self.calls), ("--records", self.records)] {
            let Some(n) = value else { continue };
            if n == 0 {
                return Err(SessionError::BadSettings(format!(
                    "{flag} 0: the buffer needs room for at least one record; give a positive count"
                )));
            }
            let bytes = n.checked_mul(RECORD_BYTES);
            let too_big = match (bytes, mem_total_bytes) {
                (None, _) => true,
                (Some(b), Some(mem)) => b > mem,
                (Some(_), None) => false,
            };
            if too_big {
                return Err(SessionError::BadSettings(format!(
                    "{flag} {n}: {n} records of {RECORD_BYTES} bytes is more than this machine's memory; give a smaller count (the buffer is allocated up front)"
                )));
            }
        }
        Ok(())
    }
}

/// MemTotal from /proc/meminfo, in bytes.
pub fn mem_total_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What one profiled run produced.
#[derive(Debug)]
pub struct SessionOutcome {
    pub profile: Profile,
    pub status: ExitStatus,
    /// Per-process files that were merged.
    pub files: Vec<PathBuf>,
    /// A process ended with the shim's "defined nowhere" status.
    pub unresolved: bool,
    /// Processes whose runtime could not write their profile (a full
    /// disk): their calls are missing from `profile`.
    pub lost: Vec<LostProfile>,
}

/// A process's profile its runtime could not write, as it reported on the
/// status pipe (`TDG_PROFILE_STATUS_FD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostProfile {
    pub pid: u32,
    pub path: String,
    /// The failed call's `errno`.
    pub errno: i32,
}

impl std::fmt::Display for LostProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} could not write its profile {} ({})",
            self.pid,
            self.path,
            std::io::Error::from_raw_os_error(self.errno)
        )
    }
}

/// The `lost pid=N errno=E path=P` lines the runtime writes on the status pipe.
pub fn parse_lost(text: &str) -> Vec<LostProfile> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("lost pid=")?;
            let (pid, rest) = rest.split_once(" errno=")?;
            let (errno, path) = rest.split_once(" path=")?;
            Some(LostProfile {
                pid: pid.parse().ok()?,
                errno: errno.parse().ok()?,
                path: path.to_string(),
            })
        })
        .collect()
}

/// A pipe the profiled processes report lost profiles on: its write end is
/// given to the program at a fixed number (close-on-exec everywhere else,
/// so no other process tdg starts holds it).
struct StatusPipe {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
}

impl StatusPipe {
    fn new() -> std::io::Result<StatusPipe> {
        use std::os::fd::FromRawFd;
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 returned two fresh descriptors we now own.
        Ok(unsafe {
            StatusPipe {
                read: std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                write: std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    /// Hands the write end to `cmd`'s process (inherited across its execs).
    fn pass_to(&self, cmd: &mut Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let fd = self.write.as_raw_fd();
        cmd.env("TDG_PROFILE_STATUS_FD", fd.to_string());
        // SAFETY: fcntl is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// What was reported (without waiting: a process the program left
    /// running may hold the write end open).
    fn reports(self) -> Vec<LostProfile> {
        use std::io::Read;
        drop(self.write);
        let mut text = Vec::new();
        let _ = std::fs::File::from(self.read).read_to_end(&mut text);
        parse_lost(&String::from_utf8_lossy(&text))
    }
}

/// What the shim's exit status `TDG_EXIT_UNRESOLVED` means and what to do.
pub fn unresolved_explanation(program: &str) -> String {
    format!(
        "`{program}` was stopped at its first call of the interposed routine with status {}: the shim found no definition of it in any object the program had loaded (the `tdg shim:` line above lists them); check the routine's name in the spec against `nm -D --defined-only LIBRARY`, and that the program loads that library",
        runtime::exit_unresolved()
    )
}

impl SessionOutcome {
    /// "exited with 0" / "was killed by SIGSEGV".
    pub fn how_it_ended(&self) -> String {
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exited with status {c}"),
            (None, Some(s)) => format!("was killed by {} (signal {s})", toolchain::signal_name(s)),
            _ => "ended".into(),
        }
    }
}

/// Where the profiled program's standard output and error go, and how
/// long it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramOutput {
    /// tdg's own (`tdg profile`: the program's output is the user's, and
    /// it stays in the terminal's process group, so Ctrl-C reaches it).
    Inherit,
    /// Nowhere, and stopped with everything it started past the limit
    /// (`tdg autotune` profiles a program it has already run).
    Discard { limit: std::time::Duration },
}

/// Runs `command` (stdio inherited) with `preload` added to `LD_PRELOAD` if
/// given, and per-process profile files in `work_dir`; merges them.
pub fn run_profiled(
    command: &[OsString],
    preload: Option<&Path>,
    settings: &RuntimeSettings,
    work_dir: &Path,
) -> Result<SessionOutcome, SessionError> {
    run_profiled_with(command, preload, settings, work_dir, ProgramOutput::Inherit)
}

/// [`run_profiled`] with the program's output sent where `output` says.
pub fn run_profiled_with(
    command: &[OsString],
    preload: Option<&Path>,
    settings: &RuntimeSettings,
    work_dir: &Path,
    output: ProgramOutput,
) -> Result<SessionOutcome, SessionError> {
    let (program, args) = command.split_first().ok_or(SessionError::NoCommand)?;
    settings.check(mem_total_bytes())?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("TDG_PROFILE_OUT", work_dir.join("profile.%p.tdgp"));
    let status_pipe = StatusPipe::new()?;
    status_pipe.pass_to(&mut cmd);
    settings.pass_to(&mut cmd, preload);
    let limit = match output {
        ProgramOutput::Inherit => None,
        ProgramOutput::Discard { limit } => {
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .stdin(std::process::Stdio::null())
                .process_group(0);
            Some(limit)
        }
    };
    tracing::debug!(command = %toolchain::render_command(&cmd), "profiling");
    let spawn_error = |source| SessionError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let status = match toolchain::wait_or_kill_group(&mut child, limit).map_err(spawn_error)? {
        // What the program left in its group is killed already.
        Some(finished) => finished.status,
        None => {
            return Err(SessionError::TimedOut {
                program: program.to_string_lossy().into_owned(),
                limit: limit.unwrap_or_default(),
            })
        }
    };
    let lost = status_pipe.reports();
    let profile_files = collect_files(work_dir)?;
    let unresolved = preload.is_some() && status.code() == Some(runtime::exit_unresolved());
    if profile_files.is_empty() {
        let program = program.to_string_lossy();
        return Err(no_profile(
            &program,
            status,
            preload.is_some(),
            unresolved,
            &lost,
        ));
    }
    let mut parts = Vec::new();
    for f in &profile_files {
        parts.push(format::read(f)?);
    }
    let profile = format::merge(parts).ok_or_else(|| {
        SessionError::NoProfile("internal: profile files vanished while merging".into())
    })?;
    Ok(SessionOutcome {
        profile,
        status,
        unresolved,
        files: profile_files,
        lost,
    })
}

impl RuntimeSettings {
    /// The shim and the runtime's settings, in the program's environment.
    fn pass_to(&self, cmd: &mut Command, preload: Option<&Path>) {
        if let Some(shim) = preload {
            cmd.env("LD_PRELOAD", toolchain::ld_preload_with(shim));
        }
        if let Some(c) = self.calls {
            cmd.env("TDG_PROFILE_CALLS", c.to_string());
        }
        if let Some(r) = self.records {
            cmd.env("TDG_PROFILE_RECORDS", r.to_string());
        }
        if self.cached_stores {
            cmd.env("TDG_PROFILE_STORES", "cached");
        }
    }
}

/// Why a run left no profile file: the shim found no routine, the files
/// could not be written, or no call was recorded (with what to check).
fn no_profile(
    program: &str,
    status: ExitStatus,
    shimmed: bool,
    unresolved: bool,
    lost: &[LostProfile],
) -> SessionError {
    if unresolved {
        return SessionError::Unresolved(program.to_string());
    }
    if !lost.is_empty() {
        let all: Vec<String> = lost.iter().map(|l| l.to_string()).collect();
        return SessionError::NoProfile(format!(
            "`{program}` recorded calls, but {}; free space there (tdg profile writes under TMPDIR) and run it again",
            all.join("; ")
        ));
    }
    let how = match status.signal() {
        Some(s) => format!(" (it was killed by {})", toolchain::signal_name(s)),
        None => String::new(),
    };
    let hint = if shimmed {
        "check that the program calls the routine through a shared library (`nm -D` on the library lists it; a static link needs the --wrap object from `tdg instrument`)"
    } else {
        "without --spec the program itself must use the TDG_PROFILE markers and link libtdg_instrument (see `tdg instrument --runtime-only`)"
    };
    SessionError::NoProfile(format!(
        "`{program}` recorded no profiled call{how}: {hint}"
    ))
}

fn collect_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("profile.") && n.ends_with(".tdgp"))
        })
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_sizes_that_the_runtime_would_ignore_or_wrap_are_refused() {
        let s = |calls, records| RuntimeSettings {
            calls,
            records,
            cached_stores: false,
        };
        let gib = Some(1u64 << 30);
        assert!(s(Some(1000), None).check(gib).is_ok());
        assert!(s(None, Some(1 << 24)).check(gib).is_ok()); // exactly 1 GiB
        let e = s(Some(0), None).check(gib).unwrap_err().to_string();
        assert!(e.contains("--calls 0") && e.contains("positive"), "{e}");
        let e = s(None, Some((1 << 24) + 1))
            .check(gib)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--records") && e.contains("memory"), "{e}");
        // 2^58 records x 64 bytes wraps a u64 to zero.
        let e = s(None, Some(1 << 58)).check(None).unwrap_err().to_string();
        assert!(e.contains("memory"), "{e}");
        assert!(mem_total_bytes().is_some_and(|m| m > 1 << 20));
    }
}
