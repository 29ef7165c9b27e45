//! The C compiler: found once per process, asked to compile one job at a
//! time, its own diagnostics carried verbatim when it refuses.

use crate::error::ToolchainError;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

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

    /// The compiler with `job`'s flags, defines and include directories:
    /// what every invocation for the job starts with.
    pub(crate) fn command(&self, job: &CompileJob) -> Command {
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
        cmd
    }

    /// The executable the compiler's name runs (symbolic links resolved),
    /// when it can be found.
    pub fn executable(&self) -> Option<PathBuf> {
        resolve_program(&self.program)
    }

    /// Runs one compiler invocation; on failure the error carries the
    /// compiler's own diagnostics verbatim.
    pub fn compile(&self, job: &CompileJob) -> Result<(), ToolchainError> {
        let mut cmd = self.command(job);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_failure_carries_compiler_message() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("bad.c");
        std::fs::write(&src, "int main(void){ return undeclared_thing; }\n").unwrap();
        let err = CCompiler::find(None)
            .expect("a C compiler is installed")
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
    fn missing_compiler_says_how_to_fix() {
        let err = CCompiler::find(Some("/nonexistent/cc")).unwrap_err();
        assert!(err.to_string().contains("apt-get install gcc"));
    }
}
