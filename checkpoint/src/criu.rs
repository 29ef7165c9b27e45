//! Finding CRIU (and libcriu), checking its version, and turning CRIU logs
//! into one-line causes.

use crate::error::{CheckpointError, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The oldest CRIU that can dump on this project's kernels (6.x exposes a
/// `[vvar_vclock]` mapping that CRIU learned in 4.1).
pub const MIN_CRIU: CriuVersion = CriuVersion {
    major: 4,
    minor: 1,
    patch: 0,
};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct CriuVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl std::fmt::Display for CriuVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl CriuVersion {
    /// Parse the `Version: X.Y[.Z]` line of `criu --version`.
    pub fn parse_version_output(text: &str) -> Option<CriuVersion> {
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Version:"))?;
        let mut parts = line.trim().split('.').map(|p| {
            p.chars()
                .take_while(|c| c.is_ascii_digit())
                .collect::<String>()
                .parse::<u32>()
        });
        let major = parts.next()?.ok()?;
        let minor = parts.next().and_then(|r| r.ok()).unwrap_or(0);
        let patch = parts.next().and_then(|r| r.ok()).unwrap_or(0);
        Some(CriuVersion {
            major,
            minor,
            patch,
        })
    }
}

/// Where the CRIU that scripts/setup builds keeps its kernel-probe cache
/// (compiled in as RUNDIR; CRIU keeps the cache only on tmpfs, and /run is
/// not tmpfs everywhere). It saves ~40 ms per dump and per restore.
pub const KDAT_CACHE_DIR: &str = "/dev/shm/tdg-criu";

/// Make sure the kernel-probe cache directory exists and that only root can
/// write it: criu runs as root and trusts the cache it finds there.
pub fn prepare_kdat_cache_dir() -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let dir = Path::new(KDAT_CACHE_DIR);
    if !dir.exists() && std::fs::DirBuilder::new().mode(0o700).create(dir).is_err() && !dir.exists()
    {
        // No /dev/shm: criu simply runs without its cache.
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(dir).map_err(crate::error::io_err(format!(
        "cannot stat {KDAT_CACHE_DIR}"
    )))?;
    let safe = meta.is_dir() && meta.uid() == 0 && meta.permissions().mode() & 0o022 == 0;
    if !safe {
        return Err(CheckpointError::InvalidRequest(format!(
            "{KDAT_CACHE_DIR} (CRIU's kernel-probe cache) is not a directory only root can write; \
             remove it (`rm -rf {KDAT_CACHE_DIR}`) and retry"
        )));
    }
    Ok(())
}

/// A usable CRIU installation.
#[derive(Debug, Clone)]
pub struct Criu {
    pub path: PathBuf,
    pub version: CriuVersion,
    /// libcriu.so for the application's self-dump (None: let the dynamic
    /// loader find a system one).
    pub libcriu: Option<PathBuf>,
}

/// Where tdg looks for criu: `TDG_CRIU` when set (there only), else each
/// absolute directory of `PATH`, in order. Never a path derived from where
/// tdg was built or lives (a build tree's `.deps`): tdg runs criu as root,
/// so the criu it runs is the one the user's `PATH` or `TDG_CRIU` names.
pub fn criu_candidates() -> Vec<PathBuf> {
    candidates_from(std::env::var_os("TDG_CRIU"), std::env::var_os("PATH"))
}

fn candidates_from(
    explicit: Option<std::ffi::OsString>,
    path: Option<std::ffi::OsString>,
) -> Vec<PathBuf> {
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut out: Vec<PathBuf> = path
        .map(|p| {
            std::env::split_paths(&p)
                // A relative entry (`.`, or the empty one) would find a
                // criu in whatever directory tdg was started from.
                .filter(|d| d.is_absolute())
                .map(|d| d.join("criu"))
                .collect()
        })
        .unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Find a CRIU >= 4.1. Errors say what was tried and how to fix it.
pub fn find_criu() -> Result<Criu> {
    let candidates = criu_candidates();
    let mut too_old = None;
    let mut broken = None;
    for cand in &candidates {
        if !cand.is_file() {
            continue;
        }
        // A broken criu early on PATH must not hide a good one later
        // (e.g. the one scripts/setup built into .deps).
        let version = match criu_version(cand) {
            Ok(v) => v,
            Err(e) => {
                broken.get_or_insert(e);
                continue;
            }
        };
        if version < MIN_CRIU {
            too_old.get_or_insert((cand.clone(), version));
            continue;
        }
        let path = cand.canonicalize().unwrap_or_else(|_| cand.clone());
        let libcriu = find_libcriu(&path);
        return Ok(Criu {
            path,
            version,
            libcriu,
        });
    }
    if let Some((path, version)) = too_old {
        return Err(CheckpointError::CriuTooOld {
            path,
            version: version.to_string(),
        });
    }
    if let Some(e) = broken {
        return Err(e);
    }
    Err(CheckpointError::CriuNotFound {
        tried: candidates
            .iter()
            .take(6)
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Run `criu --version`.
pub fn criu_version(path: &Path) -> Result<CriuVersion> {
    let out = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CheckpointError::CriuBroken {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    CriuVersion::parse_version_output(&text).ok_or_else(|| CheckpointError::CriuBroken {
        path: path.to_path_buf(),
        detail: format!("no `Version:` line in {:?}", text.trim()),
    })
}

/// libcriu next to the binary (`<prefix>/lib`), or `TDG_LIBCRIU`.
pub fn find_libcriu(criu: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TDG_LIBCRIU").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    libcriu_candidates(criu).into_iter().find(|p| p.is_file())
}

pub fn libcriu_candidates(criu: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(prefix) = criu.parent().and_then(Path::parent) {
        out.push(prefix.join("lib/libcriu.so"));
        out.push(prefix.join("lib/x86_64-linux-gnu/libcriu.so.2"));
    }
    out.push(PathBuf::from("/usr/lib/x86_64-linux-gnu/libcriu.so.2"));
    out
}

/// Is the effective user root? CRIU needs it for both dump and restore.
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Turn a CRIU log into the most telling cause, as one line. Known failures
/// ([`KNOWN_FAILURES`]) get a plain explanation and a way out; otherwise the
/// first error line.
pub fn diagnose_log(log: &str) -> String {
    // CRIU complains about raising its own descriptor limit even when all
    // goes well; that line is never the cause.
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Error (") || l.contains("Error:"))
        .filter(|l| !l.contains("RLIMIT_NOFILE"))
        .collect();
    for known in KNOWN_FAILURES {
        let shows = |l: &&str| known.any_of.iter().any(|n| l.contains(n));
        let line = if known.errors_only {
            errors.iter().copied().find(shows)
        } else {
            log.lines().find(shows)
        };
        if let Some(cause) = line.and_then(known.cause) {
            return cause;
        }
    }
    if !running_as_root()
        && (log.contains("CAP_SYS_ADMIN") || log.contains("Operation not permitted"))
    {
        return "CRIU lacks privileges; run as root".into();
    }
    match errors.first() {
        Some(line) => format!("CRIU reported: {}", after_location(line)),
        None => "CRIU failed without an error line in its log".into(),
    }
}

/// A CRIU failure tdg knows: the log line that shows it, and the cause read
/// from that line (None: the line does not show it after all).
struct KnownFailure {
    /// Only error lines show it (else any line of the log).
    errors_only: bool,
    /// The first line holding one of these shows it.
    any_of: &'static [&'static str],
    cause: fn(&str) -> Option<String>,
}

/// The known failures, the most telling first.
const KNOWN_FAILURES: &[KnownFailure] = &[
    KnownFailure {
        errors_only: false,
        any_of: &["has bad size"],
        cause: file_size_changed,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Some file locks are hold by dumping tasks"],
        cause: |_| Some(inherited_lock_error(&held_locks("/proc/self"))),
    },
    KnownFailure {
        errors_only: false,
        any_of: &["is outside of its pid namespace"],
        cause: |_| Some(SESSION_OUTSIDE_NAMESPACE.into()),
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Can't lookup mount="],
        cause: foreign_mount,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Connected TCP socket"],
        cause: |_| Some(TCP_CONNECTION.into()),
    },
    KnownFailure {
        errors_only: true,
        any_of: &["criu/sockets.c", "criu/sk-inet.c"],
        cause: network_socket,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["External socket"],
        cause: |_| Some(EXTERNAL_UNIX_SOCKET.into()),
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Can't fork for"],
        cause: pid_in_use,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["do not match expected"],
        cause: pid_in_use,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Unable to detach"],
        cause: copy_ended_during_detach,
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Unexpected rt vDSO area bounds"],
        cause: |_| Some(CRIU_TOO_OLD.into()),
    },
    KnownFailure {
        errors_only: false,
        any_of: &["Can't open file"],
        cause: file_cannot_open,
    },
];

const SESSION_OUTSIDE_NAMESPACE: &str =
    "the application's session leader is outside its PID namespace (a container or \
     `unshare --pid` started without setsid), so CRIU cannot record its session; \
     start it through `tdg checkpoint capture`, which gives it a session of its own, \
     or under `setsid`";
const TCP_CONNECTION: &str =
    "the application holds an established TCP connection, which CRIU cannot \
     checkpoint here; checkpoint before it connects or close the connection first";
const EXTERNAL_UNIX_SOCKET: &str =
    "the application holds a UNIX socket connected to a process outside it; \
     close it before the checkpoint";
const CRIU_TOO_OLD: &str =
    "this CRIU is too old for the kernel's vDSO layout; use CRIU >= 4.1 (`scripts/setup`)";

/// An error line's text after CRIU's `(file:line): ` location.
fn after_location(line: &str) -> &str {
    line.split_once("): ")
        .map(|(_, r)| r)
        .unwrap_or(line)
        .trim()
}

fn file_size_changed(line: &str) -> Option<String> {
    let path = line
        .split("File ")
        .nth(1)
        .and_then(|r| r.split(" has bad size").next())
        .unwrap_or("?");
    Some(format!(
        "a file the application had open changed size since the capture: /{path} \
         (restore it, or reopen it O_WRONLY|O_APPEND, or recapture)"
    ))
}

fn foreign_mount(line: &str) -> Option<String> {
    let fd = line
        .split("for fd=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("?");
    let path = line.split("path=").nth(1).unwrap_or("?").trim();
    Some(format!(
        "the application holds descriptor {fd} ({path}) opened in another mount namespace, \
         which CRIU cannot record; close it before starting tdg (e.g. `{fd}<&-` in the shell) \
         or start tdg in the namespace that opened it"
    ))
}

fn network_socket(line: &str) -> Option<String> {
    Some(format!(
        "the application holds a network (TCP/UDP) socket that CRIU cannot checkpoint here ({}); \
         checkpoint before the socket is opened, or close it first",
        after_location(line)
    ))
}

fn pid_in_use(line: &str) -> Option<String> {
    let pid = line
        .split_whitespace()
        .find_map(|w| w.trim_end_matches(':').parse::<u32>().ok())
        .map(|p| format!(" {p}"))
        .unwrap_or_default();
    Some(format!(
        "PID{pid} is already in use, so CRIU cannot give the restored process its original PID \
         (restore in a fresh PID namespace, or wait for that process to exit)"
    ))
}

fn copy_ended_during_detach(line: &str) -> Option<String> {
    if !line.contains("No such process") {
        return None;
    }
    let thread = line
        .split("Unable to detach ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap_or("?");
    Some(format!(
        "the restored copy ended while CRIU was still letting go of its thread {thread}, so CRIU \
         failed the restore (CRIU issue 2072); the host library in this image predates the copy's \
         wait for CRIU: recapture (a capture with --spec builds its own; otherwise rebuild the \
         application with `tdg checkpoint lib` first)"
    ))
}

fn file_cannot_open(line: &str) -> Option<String> {
    let what = line.split("Can't open file").nth(1).unwrap_or("").trim();
    Some(format!(
        "a file the application had open can no longer be opened: {what} (put it back, or recapture)"
    ))
}

/// The one-line cause of CRIU's "Some file locks are hold by dumping
/// tasks": the application holds a lock; when tdg holds it too it was
/// inherited (typically `flock FILE tdg ...`), and `locks` names it.
fn inherited_lock_error(locks: &[HeldLock]) -> String {
    match locks.first() {
        Some(lock) => format!(
            "the application inherited descriptor {fd} ({path}) with a {kind} lock on it, which \
             CRIU cannot checkpoint; close it before starting tdg (`{fd}>&-` in the shell), or take \
             the lock with `flock -o`, which keeps it from the command",
            fd = lock.fd,
            path = lock.path.display(),
            kind = lock.kind,
        ),
        None => "the application holds a file lock (flock, fcntl or lockf), which CRIU cannot \
                 checkpoint; release it before the checkpoint (a lock inherited from \
                 `flock FILE cmd`: use `flock -o`, which keeps it from the command)"
            .into(),
    }
}

/// A descriptor with a file lock on its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLock {
    pub fd: i32,
    pub path: PathBuf,
    /// FLOCK, POSIX or OFDLCK, as the kernel names it.
    pub kind: String,
}

/// The descriptors of process `proc_dir` (`/proc/self`, `/proc/PID`) that a
/// program it starts inherits (no close-on-exec) and whose file carries a
/// lock (the `lock:` lines of its fdinfo), lowest first.
pub fn held_locks(proc_dir: &str) -> Vec<HeldLock> {
    let Ok(entries) = std::fs::read_dir(format!("{proc_dir}/fdinfo")) else {
        return Vec::new();
    };
    let mut out: Vec<HeldLock> = entries
        .flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let info = std::fs::read_to_string(e.path()).ok()?;
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| i64::from_str_radix(f.trim(), 8).ok())?;
            if flags & libc::O_CLOEXEC as i64 != 0 {
                return None;
            }
            let kind = info
                .lines()
                .find_map(|l| l.strip_prefix("lock:"))?
                .split_whitespace()
                .nth(1)?
                .to_string();
            let path = std::fs::read_link(format!("{proc_dir}/fd/{fd}")).ok()?;
            Some(HeldLock { fd, path, kind })
        })
        .collect();
    out.sort_by_key(|l| l.fd);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inherited_lock_is_named_with_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timing.lock");
        let file = std::fs::File::create(&path).unwrap();
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // Rust opens close-on-exec: a program started would not inherit it.
        assert_eq!(unsafe { libc::flock(fd, libc::LOCK_EX) }, 0);
        assert!(!held_locks("/proc/self").iter().any(|l| l.fd == fd));
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
        let locks = held_locks("/proc/self");
        let lock = locks
            .iter()
            .find(|l| l.fd == fd)
            .expect("the lock is found");
        assert_eq!(lock.path, path);
        assert_eq!(lock.kind, "FLOCK");
        let message = inherited_lock_error(std::slice::from_ref(lock));
        assert!(message.contains(&format!("descriptor {fd} ({})", path.display())));
        assert!(message.contains("flock -o") && message.contains(&format!("`{fd}>&-`")));
        assert!(!message.contains('\n'));
        let log = "(00.01) Error (criu/cr-dump.c:2050): Some file locks are hold by dumping tasks!";
        assert!(diagnose_log(log).contains("flock -o"));
    }

    #[test]
    fn criu_comes_from_tdg_criu_or_path_only() {
        let path = std::ffi::OsString::from("/opt/criu/bin::.:/usr/sbin:/opt/criu/bin");
        assert_eq!(
            candidates_from(None, Some(path.clone())),
            [
                PathBuf::from("/opt/criu/bin/criu"),
                PathBuf::from("/usr/sbin/criu")
            ]
        );
        assert_eq!(
            candidates_from(Some("/x/criu".into()), Some(path)),
            [PathBuf::from("/x/criu")]
        );
        assert!(candidates_from(None, None).is_empty());
    }

    #[test]
    fn parses_criu_version_lines() {
        let v = CriuVersion::parse_version_output("Version: 4.1.1\n").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (4, 1, 1));
        let v = CriuVersion::parse_version_output("Version: 3.17\nGitID: v3.17\n").unwrap();
        assert!(v < MIN_CRIU);
        assert!(CriuVersion::parse_version_output("criu: unknown option").is_none());
    }

    #[test]
    fn diagnoses_known_failures() {
        let bad = "(00.01) Error (criu/files-reg.c:2175): File tmp/out.txt has bad size 120 (expect 40)\n";
        let cause = diagnose_log(bad);
        assert!(
            cause.contains("/tmp/out.txt") && cause.contains("changed size"),
            "{cause}"
        );
        let tcp = "Error (criu/sk-inet.c:191): Connected TCP socket, consider using --tcp-established option.\n";
        assert!(diagnose_log(tcp).contains("TCP connection"));
        let pid = "Error (criu/cr-restore.c:1230): Can't fork for 4242: File exists\n";
        assert!(diagnose_log(pid).contains("PID 4242 is already in use"));
        let inet = "Error (criu/util.c:1533): rlimit: Can't setup RLIMIT_NOFILE for self: Operation not permitted\n\
                    Error (criu/sockets.c:628): sockets: Can't get 1:16 opt: Operation not supported\n";
        let cause = diagnose_log(inet);
        assert!(
            cause.contains("TCP/UDP) socket") && cause.contains("1:16"),
            "{cause}"
        );
        let session = "Error (criu/cr-dump.c:1664): A session leader of 4929(4929) is outside of its pid namespace\n";
        let cause = diagnose_log(session);
        assert!(
            cause.contains("session leader") && cause.contains("setsid"),
            "{cause}"
        );
        let mount =
            "Error (criu/files-reg.c:1790): Can't lookup mount=24 for fd=10 path=/dev/null\n";
        let cause = diagnose_log(mount);
        assert!(
            cause.contains("descriptor 10 (/dev/null)") && cause.contains("10<&-"),
            "{cause}"
        );
        let detach = "Error (criu/cr-restore.c:1916): Unable to detach 12578: No such process\n\
                      Error (criu/cr-restore.c:2320): Restoring FAILED.\n";
        let cause = diagnose_log(detach);
        assert!(
            cause.contains("thread 12578") && cause.contains("recapture"),
            "{cause}"
        );
        let other = "Error (criu/util.c:1533): rlimit: Can't setup RLIMIT_NOFILE for self\n\
                     (0.1) Error (criu/mem.c:12): something odd\n";
        assert_eq!(diagnose_log(other), "CRIU reported: something odd");
    }
}
