//! The user's program, run whole: plainly, under the profiling shim, or
//! with the tuned routine preloaded. Every run is timed from start to exit
//! (the time the program's user feels), its standard output is kept as a
//! digest (outputs can be large or binary, and two runs are compared byte
//! for byte), and nothing it started outlives it.

use sha2::Digest;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The program as the user gave it after `--`, and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub argv: Vec<OsString>,
    /// The directory it runs in (the one tdg was started in).
    pub cwd: PathBuf,
    /// Longest one run may take before it is stopped.
    pub timeout: Duration,
}

/// How one run was set up beyond the user's own environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// Put first in `LD_PRELOAD` (the user's own preloads are kept after it).
    pub preload: Option<PathBuf>,
    /// More environment variables (the profiling shim's settings).
    pub env: Vec<(OsString, OsString)>,
}

/// One finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramRun {
    /// From start to the program's exit.
    pub wall: Duration,
    pub status: ExitStatus,
    /// SHA-256 of everything it wrote to standard output.
    pub stdout_sha256: String,
    pub stdout_bytes: u64,
    /// The end of its standard error (for a message when it failed).
    pub stderr_tail: String,
    /// Processes it left behind in its group, stopped when it exited.
    pub leftovers_stopped: bool,
}

impl ProgramRun {
    pub fn succeeded(&self) -> bool {
        self.status.success()
    }

    /// "exited with status 3" / "was killed by SIGSEGV", with the last
    /// line of its standard error.
    pub fn how_it_ended(&self) -> String {
        let how = match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by {}", toolchain::signal_name(sig)),
            (None, None) => "ended in an unknown way".to_string(),
        };
        match self
            .stderr_tail
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
        {
            Some(last) => format!("{how} ({})", last.trim()),
            None => how,
        }
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("cannot start `{program}`: {source}; check the command after `--`")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{program}` ran longer than {limit:?} and was stopped with everything it started; raise --timeout if it needs longer")]
    TimedOut { program: String, limit: Duration },
    #[error("waiting for `{program}`: {source}")]
    Wait {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Bytes of standard error kept for messages.
const STDERR_TAIL: usize = 4096;

impl Program {
    pub fn name(&self) -> String {
        self.argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The file the program's first word runs: itself when it names a
    /// path, else the first of that name on `PATH` (None: not found).
    pub fn executable(&self) -> Option<PathBuf> {
        let first = PathBuf::from(self.argv.first()?);
        if first.components().count() > 1 {
            return Some(self.cwd.join(first)).filter(|p| p.is_file());
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(&first))
            .find(|p| p.is_file())
    }

    /// Runs the program once, to its end or its time limit.
    pub fn run(&self, launch: &Launch) -> Result<ProgramRun, ProgramError> {
        let program = self.name();
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..]).current_dir(&self.cwd);
        if let Some(preload) = &launch.preload {
            cmd.env("LD_PRELOAD", toolchain::ld_preload_with(preload));
        }
        for (k, v) in &launch.env {
            cmd.env(k, v);
        }
        toolchain::tie_to_tdg(&mut cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|source| ProgramError::Spawn {
            program: program.clone(),
            source,
        })?;
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let digest = std::thread::spawn(move || {
            let mut hasher = sha2::Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            let mut total = 0u64;
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                total += n as u64;
            }
            (format!("{:x}", hasher.finalize()), total)
        });
        let tail = std::thread::spawn(move || {
            let mut kept: Vec<u8> = Vec::new();
            let mut buf = vec![0u8; 1 << 14];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > 2 * STDERR_TAIL {
                    kept.drain(..kept.len() - STDERR_TAIL);
                }
            }
            let from = kept.len().saturating_sub(STDERR_TAIL);
            String::from_utf8_lossy(&kept[from..]).into_owned()
        });
        let waited = toolchain::wait_or_kill_group(&mut child, Some(self.timeout));
        let wall = started.elapsed();
        let pgid = child.id() as libc::pid_t;
        // Whatever the program left running in its group would hold its
        // pipes open (and keep running as root): stop it, and say so.
        let mut leftovers_stopped = stop_group(pgid);
        let status = match waited {
            // toolchain stops what a normal exit left in the group itself.
            Ok(Some(finished)) => {
                leftovers_stopped |= !finished.leftovers.is_empty();
                finished.status
            }
            Ok(None) => {
                return Err(ProgramError::TimedOut {
                    program,
                    limit: self.timeout,
                })
            }
            Err(source) => return Err(ProgramError::Wait { program, source }),
        };
        let (stdout_sha256, stdout_bytes) = digest.join().unwrap_or_default();
        let stderr_tail = tail.join().unwrap_or_default();
        Ok(ProgramRun {
            wall,
            status,
            stdout_sha256,
            stdout_bytes,
            stderr_tail,
            leftovers_stopped,
        })
    }
}

/// Kills what is left of process group `pgid` after its leader exited;
/// whether anything was.
fn stop_group(pgid: libc::pid_t) -> bool {
    // SAFETY: plain kill(2) calls on a group id; signal 0 only asks.
    unsafe {
        if libc::kill(-pgid, 0) != 0 {
            return false;
        }
        libc::kill(-pgid, libc::SIGKILL) == 0
    }
}

/// The program's words as one line, for messages and records.
pub fn command_line(argv: &[OsString]) -> String {
    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

fn quote(a: &OsStr) -> String {
    let s = a.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Program {
        Program {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: std::env::current_dir().unwrap(),
            timeout: Duration::from_secs(20),
        }
    }

    #[test]
    fn a_run_keeps_the_digest_of_its_output_and_its_status() {
        let a = sh("printf 'hello\\n'").run(&Launch::default()).unwrap();
        let b = sh("printf 'hello\\n'").run(&Launch::default()).unwrap();
        let c = sh("printf 'hellp\\n'").run(&Launch::default()).unwrap();
        assert!(a.succeeded());
        assert_eq!(a.stdout_bytes, 6);
        assert_eq!(a.stdout_sha256, b.stdout_sha256);
        assert_ne!(a.stdout_sha256, c.stdout_sha256);
        let failed = sh("echo broken >&2; exit 3")
            .run(&Launch::default())
            .unwrap();
        assert!(!failed.succeeded());
        assert_eq!(failed.how_it_ended(), "exited with status 3 (broken)");
    }

    #[test]
    fn a_binary_output_differing_in_one_byte_is_told_apart() {
        let a = sh("printf '\\377\\376'").run(&Launch::default()).unwrap();
        let b = sh("printf '\\376\\377'").run(&Launch::default()).unwrap();
        assert_eq!(a.stdout_bytes, 2);
        assert_ne!(a.stdout_sha256, b.stdout_sha256);
    }

    #[test]
    fn a_program_that_leaves_a_process_behind_ends_with_it_stopped() {
        let started = Instant::now();
        let run = sh("sleep 300 & echo done").run(&Launch::default()).unwrap();
        assert!(run.succeeded());
        assert!(run.leftovers_stopped, "the background sleep was found");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the leftover's open pipe was not waited for"
        );
    }

    #[test]
    fn a_run_past_its_limit_is_stopped() {
        let mut p = sh("sleep 300");
        p.timeout = Duration::from_millis(200);
        match p.run(&Launch::default()) {
            Err(ProgramError::TimedOut { .. }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_preload_and_the_environment_reach_the_program() {
        let run = sh("test \"$TDG_X\" = 7 && case \"$LD_PRELOAD\" in /nonexistent/x.so*) exit 0;; esac; exit 1")
            .run(&Launch {
                preload: Some("/nonexistent/x.so".into()),
                env: vec![("TDG_X".into(), "7".into())],
            })
            .unwrap();
        // The dynamic loader complains about the missing object on stderr
        // and goes on.
        assert!(run.succeeded(), "{}", run.how_it_ended());
    }

    #[test]
    fn a_command_line_is_quoted_as_a_shell_reads_it() {
        let argv: Vec<OsString> = vec!["python3".into(), "-c".into(), "print('a b')".into()];
        assert_eq!(command_line(&argv), r#"python3 -c 'print('\''a b'\'')'"#);
    }
}
