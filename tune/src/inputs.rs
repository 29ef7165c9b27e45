//! What a campaign's results depend on, each recorded with a hash when the
//! campaign starts, so that `--resume` reuses nothing stale: the spec, the
//! implementation and extra C files, every header the preprocessor reads
//! for them and for the spec's `include=` lines (the compiler's dependency
//! output), the compiler (its version and its executable) and the flags
//! and `-D` values every candidate is compiled with, the contexts file a
//! search scores over, each checkpoint image's manifest and the application
//! binary it names, and this tdg.

use crate::TuneError;
use config::Config;
use driver_gen::RunOptions;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use spec_lang::CheckedSpec;
use std::path::{Path, PathBuf};

/// One input of a campaign's results, with the SHA-256 of its content when
/// the campaign started (or last accepted a change).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    /// What it is to the campaign: `spec`, `implementation`, `extra`,
    /// `header`, `compiler`, `compiler flags`, `image manifest`,
    /// `application`, `tdg`.
    pub role: String,
    /// A file's path as given (relative to the campaign's `cwd`); for an
    /// input that is a value rather than a file ([`VALUE_ROLES`]), its text.
    pub path: PathBuf,
    pub sha256: String,
}

/// Inputs that are one value each, not a file: matched by role alone, their
/// `path` holding the value, so a change can say what it was and is.
pub const VALUE_ROLES: [&str; 2] = ["compiler", "compiler flags"];

fn hex(digest: impl AsRef<[u8]>) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

impl InputFile {
    /// `path` as it is now.
    pub fn hash(role: &str, path: &Path) -> Result<InputFile, TuneError> {
        let mut file = std::fs::File::open(path).map_err(|e| {
            TuneError::Executor(format!("cannot read the {role} {}: {e}", path.display()))
        })?;
        let mut hasher = sha2::Sha256::new();
        std::io::copy(&mut file, &mut hasher).map_err(|e| {
            TuneError::Executor(format!("cannot read the {role} {}: {e}", path.display()))
        })?;
        Ok(InputFile {
            role: role.to_string(),
            path: path.to_path_buf(),
            sha256: hex(hasher.finalize()),
        })
    }

    /// An input that is a value: `shown` is what a change names, `identity`
    /// everything that decides it.
    pub fn value(role: &str, shown: &str, identity: &str) -> InputFile {
        InputFile {
            role: role.to_string(),
            path: PathBuf::from(shown),
            sha256: hex(sha2::Sha256::digest(identity.as_bytes())),
        }
    }

    fn is_value(&self) -> bool {
        VALUE_ROLES.contains(&self.role.as_str())
    }

    /// Whether `self` and `other` record the same input (perhaps with
    /// different content): the same role and file; tdg is one binary
    /// wherever it runs from, and a value has one record.
    pub fn same_input(&self, other: &InputFile) -> bool {
        self.role == other.role
            && (self.path == other.path || self.role == "tdg" || self.is_value())
    }

    /// How the input recorded as `self` differs from `now`, in words.
    pub fn change(&self, now: &InputFile) -> String {
        if self.is_value() && self.path != now.path {
            format!(
                "the {} changed since the campaign started (`{}` then, `{}` now)",
                self.role,
                self.path.display(),
                now.path.display()
            )
        } else if self.is_value() {
            format!(
                "the {} `{}` changed since the campaign started",
                self.role,
                self.path.display()
            )
        } else {
            format!(
                "the {} {} changed since the campaign started",
                self.role,
                self.path.display()
            )
        }
    }

    /// Every input of a campaign's results, as it is now.
    pub fn of_campaign(sources: &CampaignSources) -> Result<Vec<InputFile>, TuneError> {
        let tdg = std::env::current_exe().map_err(|e| {
            TuneError::Executor(format!(
                "cannot find the tdg binary to record its hash: {e}"
            ))
        })?;
        let mut inputs = vec![
            InputFile::hash("spec", sources.spec_path)?,
            InputFile::hash("implementation", sources.implementation)?,
        ];
        for extra in sources.extra {
            inputs.push(InputFile::hash("extra", extra)?);
        }
        let cc = toolchain::CCompiler::find(sources.build.cc.as_deref())
            .map_err(|e| TuneError::Objective(e.to_string()))?;
        for header in headers(sources, &cc)? {
            inputs.push(InputFile::hash("header", &header)?);
        }
        inputs.push(compiler(&cc)?);
        inputs.push(flags(sources));
        if let Some(file) = sources.contexts {
            inputs.push(InputFile::hash("contexts", file)?);
        }
        for image in sources.images {
            inputs.push(InputFile::hash(
                "image manifest",
                &image.join(checkpoint::manifest::MANIFEST_FILE),
            )?);
            let manifest =
                checkpoint::manifest::Manifest::read(image).map_err(TuneError::Checkpoint)?;
            inputs.push(InputFile::hash("application", &manifest.exe)?);
        }
        inputs.push(InputFile::hash("tdg", &tdg)?);
        Ok(inputs)
    }
}

/// What a campaign builds and times each configuration from.
pub struct CampaignSources<'a> {
    pub spec_path: &'a Path,
    pub spec: &'a CheckedSpec,
    pub implementation: &'a Path,
    /// More C files built into every candidate.
    pub extra: &'a [PathBuf],
    /// The compiler, flags and fixed `-D` values every candidate shares.
    pub build: &'a RunOptions,
    /// A configuration of the space: the headers are those the
    /// preprocessor reads with its macros set (a kernel may refuse, or
    /// include other files, without them).
    pub at: &'a Config,
    /// The contexts file the configurations are scored over, if any.
    pub contexts: Option<&'a Path>,
    /// Every checkpoint image the configurations run on.
    pub images: &'a [PathBuf],
}

/// Every header the preprocessor reads for the implementation, the extra
/// files and the spec's `include=` lines (which the generated driver
/// copies to its top, finding them beside the implementation), system
/// headers too; the sources themselves are inputs of their own.
fn headers(s: &CampaignSources, cc: &toolchain::CCompiler) -> Result<Vec<PathBuf>, TuneError> {
    let mut defines = s.build.defines.clone();
    let mut threads = None;
    s.at.apply(&mut defines, &mut threads);
    let defines: Vec<(String, Option<String>)> =
        defines.into_iter().map(|(k, v)| (k, Some(v))).collect();
    let dir_of = |p: &Path| {
        p.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
    };
    let scratch = toolchain::scratch_dir("tdg-tune-inputs")
        .map_err(|e| TuneError::Objective(format!("cannot create a scratch directory: {e}")))?;
    let includes = scratch.path().join("spec-includes.c");
    let lines: String = s
        .spec
        .spec
        .includes
        .iter()
        .map(|i| format!("{}\n", i.text))
        .collect();
    std::fs::write(&includes, lines)
        .map_err(|e| TuneError::Objective(format!("cannot write {}: {e}", includes.display())))?;
    let header_dir = s
        .build
        .header_dir
        .clone()
        .or_else(|| dir_of(s.implementation));
    let mut jobs: Vec<(PathBuf, Option<PathBuf>)> = std::iter::once(s.implementation)
        .chain(s.extra.iter().map(PathBuf::as_path))
        .map(|src| (src.to_path_buf(), dir_of(src)))
        .collect();
    jobs.push((includes.clone(), header_dir));
    let mut found: Vec<PathBuf> = Vec::new();
    for (source, dir) in jobs {
        let job = toolchain::CompileJob {
            sources: vec![source.clone()],
            cflags: s.build.cflags.clone(),
            defines: defines.clone(),
            include_dirs: dir.into_iter().collect(),
            ..Default::default()
        };
        let read = cc.dependencies(&job).map_err(|e| {
            TuneError::Objective(format!(
                "cannot list the headers {} includes (the campaign records each to tell a resumed search of changed inputs): {}",
                source.display(),
                first_error(&e.to_string())
            ))
        })?;
        for f in read {
            let own = f == source || f == s.implementation || s.extra.contains(&f);
            if !own && !found.contains(&f) {
                found.push(f);
            }
        }
    }
    Ok(found)
}

/// The compiler's first error line (else its last line): what to fix.
fn first_error(text: &str) -> &str {
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| l.contains("error"))
        .or_else(|| lines().next_back())
        .unwrap_or("")
}

/// The compiler by its version and the executable its name runs (a wrapper
/// script edited, or the package rebuilt, is another compiler).
fn compiler(cc: &toolchain::CCompiler) -> Result<InputFile, TuneError> {
    let exe = cc.executable();
    let content = match &exe {
        Some(path) => InputFile::hash("compiler", path)?.sha256,
        None => String::new(),
    };
    let shown = match &exe {
        Some(path) => format!("{} ({})", cc.version, path.display()),
        None => format!("{} ({})", cc.version, cc.program),
    };
    Ok(InputFile::value(
        "compiler",
        &shown,
        &format!("{shown}\n{content}"),
    ))
}

/// The flags and fixed `-D` values every candidate is compiled with.
fn flags(s: &CampaignSources) -> InputFile {
    let text = s
        .build
        .cflags
        .iter()
        .cloned()
        .chain(s.build.defines.iter().map(|(k, v)| format!("-D{k}={v}")))
        .collect::<Vec<_>>()
        .join(" ");
    InputFile::value("compiler flags", &text, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_input_says_what_it_was_and_is() {
        let then = InputFile::value("compiler flags", "-O2", "-O2");
        let now = InputFile::value("compiler flags", "-O3", "-O3");
        assert!(then.same_input(&now));
        assert_ne!(then.sha256, now.sha256);
        assert_eq!(
            then.change(&now),
            "the compiler flags changed since the campaign started (`-O2` then, `-O3` now)"
        );
        let a = InputFile::value("compiler", "gcc 12 (/usr/bin/gcc-12)", "x");
        let b = InputFile::value("compiler", "gcc 12 (/usr/bin/gcc-12)", "y");
        assert!(a
            .change(&b)
            .contains("compiler `gcc 12 (/usr/bin/gcc-12)` changed"));
        let h = InputFile {
            role: "header".into(),
            path: "k.h".into(),
            sha256: "1".into(),
        };
        let other = InputFile {
            path: "j.h".into(),
            ..h.clone()
        };
        assert!(!h.same_input(&other));
    }
}
