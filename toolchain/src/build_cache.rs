//! Compiled objects kept between builds, keyed by a hash of everything that
//! went into them: the compiler's identity, the flags, the defines, the
//! source's contents and the contents of every header it read. A tuning
//! search builds one driver per configuration, and only the implementation's
//! macros change between them: the driver, its runtime and the placement
//! padding compile once and are reused, in this process and the next.
//!
//! The key is known before compiling except for the headers, which only the
//! compiler knows (`-MD`). So an entry holds the object and the list of the
//! files the compiler read with their hashes; a lookup is a hit only when
//! every one of them still hashes the same (ccache's "direct mode"). Files
//! in the source's own directory are recorded relative to it: a generated
//! driver is written to a new scratch directory every time, and its headers
//! with it.
//!
//! The directory is private (0700, owned by this user, not a symlink);
//! entries are written to a temporary file in it and renamed into place,
//! the object first and its dependency list last, so a dependency list
//! always names a whole object.

use crate::compiler::{CCompiler, CompileJob, CompilerKind};
use crate::error::ToolchainError;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bumped when the key or the entry layout changes, so old entries are
/// never read under a new meaning.
const FORMAT: &str = "tdg-build-cache 1";

const PURPOSE: fsguard::Purpose = fsguard::Purpose {
    what: "build cache",
    option: "TDG_CACHE_DIR",
};

/// Entries kept; past this the least recently used quarter goes.
const MAX_ENTRIES: usize = 4096;

/// A private directory of compiled objects.
#[derive(Debug, Clone)]
pub struct BuildCache {
    dir: PathBuf,
}

/// What [`CCompiler::compile_object`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// The compiler ran (and, with a cache, the object was stored).
    Built,
    /// The object came from the cache; no compiler ran.
    Reused,
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let named = crate::io_context(what);
    move |e| ToolchainError::Io(named(e))
}

impl BuildCache {
    /// Opens (creating, 0700, marked as tdg's: `fsguard::OwnedDir`) the
    /// cache in `dir`. Refused with the way out when `dir` is a symlink, not
    /// a directory, a directory tdg did not make, or another user's: tdg
    /// runs as root and must not write objects where someone else decides
    /// what they contain.
    pub fn open(dir: &Path) -> Result<BuildCache, ToolchainError> {
        let owned = fsguard::OwnedDir::open(dir, PURPOSE)
            .map_err(|e| ToolchainError::Cache(e.to_string()))?;
        let dir = owned.path();
        let m = std::fs::metadata(dir).map_err(io_err(format!("cannot open {}", dir.display())))?;
        if m.uid() != unsafe_geteuid() {
            return Err(ToolchainError::Cache(format!(
                "the build cache {} belongs to user {}, not to this user; set TDG_CACHE_DIR to a directory of your own",
                dir.display(),
                m.uid()
            )));
        }
        if m.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(io_err(format!("cannot make {} private", dir.display())))?;
        }
        Ok(BuildCache {
            dir: dir.to_path_buf(),
        })
    }

    /// [`Self::open`], or `None` with a warning saying why: a build goes on
    /// without the cache rather than fail over it.
    pub fn open_or_warn(dir: &Path) -> Option<BuildCache> {
        BuildCache::open(dir)
            .map_err(|e| tracing::warn!("{e}; building without the cache"))
            .ok()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn object_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.o"))
    }

    fn deps_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.deps"))
    }

    /// Copies the object of `key` to `output` when every file it was built
    /// from still hashes as recorded.
    fn lookup(&self, key: &str, source_dir: &Path, output: &Path) -> bool {
        let Ok(text) = std::fs::read_to_string(self.deps_path(key)) else {
            return false;
        };
        let fresh = text.lines().all(|line| {
            let Some((hash, name)) = line.split_once(' ') else {
                return false;
            };
            let path = resolve_dep(name, source_dir);
            file_hash(&path).is_some_and(|h| h == hash)
        });
        if !fresh || text.is_empty() {
            return false;
        }
        let object = self.object_path(key);
        if std::fs::copy(&object, output).is_err() {
            return false;
        }
        // Recently used entries are the ones pruning keeps.
        let _ = std::fs::File::options()
            .append(true)
            .open(self.deps_path(key))
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        true
    }

    /// Stores `object` and the files it was built from under `key`.
    fn store(
        &self,
        key: &str,
        object: &Path,
        deps: &[PathBuf],
        source_dir: &Path,
    ) -> Result<(), ToolchainError> {
        let mut listing = String::new();
        for dep in deps {
            let Some(hash) = file_hash(dep) else {
                // A file the compiler read and that is gone now: nothing to
                // check a later build against, so the object is not kept.
                return Ok(());
            };
            listing.push_str(&format!("{hash} {}\n", record_dep(dep, source_dir)));
        }
        let bytes = std::fs::read(object).map_err(io_err(format!(
            "cannot read the compiled object {}",
            object.display()
        )))?;
        self.write_atomic(&self.object_path(key), &bytes)?;
        self.write_atomic(&self.deps_path(key), listing.as_bytes())?;
        self.prune();
        Ok(())
    }

    /// A temporary file in the cache renamed over `dest`: whole or absent.
    /// Not `fsguard::write_atomic`, which also syncs: an entry lost in a
    /// crash is only compiled again, and a sync per object would cost
    /// every configuration of a search.
    fn write_atomic(&self, dest: &Path, bytes: &[u8]) -> Result<(), ToolchainError> {
        let what = || format!("cannot write {} into the build cache", dest.display());
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(io_err(what()))?;
        tmp.write_all(bytes).map_err(io_err(what()))?;
        // rename(2) replaces a planted symlink at `dest` rather than
        // following it.
        tmp.persist(dest).map_err(|e| io_err(what())(e.error))?;
        Ok(())
    }

    /// Keeps the cache under [`MAX_ENTRIES`]: the least recently used
    /// quarter of the entries goes when it is over. Only files this cache
    /// names (a 64-digit key with `.o` or `.deps`) are removed.
    fn prune(&self) {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(std::time::SystemTime, String)> = read
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let key = name.strip_suffix(".deps")?;
                is_key(key).then_some(())?;
                let used = e.metadata().ok()?.modified().ok()?;
                Some((used, key.to_string()))
            })
            .collect();
        if entries.len() <= MAX_ENTRIES {
            return;
        }
        entries.sort();
        for (_, key) in entries.iter().take(entries.len() - MAX_ENTRIES * 3 / 4) {
            let _ = std::fs::remove_file(self.deps_path(key));
            let _ = std::fs::remove_file(self.object_path(key));
        }
    }
}

fn unsafe_geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn is_key(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn file_hash(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(hex(&Sha256::digest(&bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A dependency as the listing records it: relative to the source's own
/// directory when it is in it (`./name`), else its absolute path.
fn record_dep(dep: &Path, source_dir: &Path) -> String {
    match dep.strip_prefix(source_dir) {
        Ok(rel) => format!("./{}", rel.display()),
        Err(_) => dep.display().to_string(),
    }
}

fn resolve_dep(name: &str, source_dir: &Path) -> PathBuf {
    match name.strip_prefix("./") {
        Some(rel) => source_dir.join(rel),
        None => PathBuf::from(name),
    }
}

/// The files a make-style dependency file (`-MD -MF`) lists after its
/// target: backslash-newline continues a line, a backslash escapes a space.
fn parse_make_deps(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\n", " ");
    let Some((_, after)) = joined.split_once(": ") else {
        return Vec::new();
    };
    let line = after.lines().next().unwrap_or("");
    let mut deps = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' | '\t' => {
                if !current.is_empty() {
                    deps.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        deps.push(PathBuf::from(current));
    }
    deps
}

impl CCompiler {
    /// Every file the preprocessor reads for `job`'s sources, as the
    /// compiler's dependency output (`-M`) lists them: each source and every
    /// header it includes, system headers too, in order, once each. A source
    /// the preprocessor stops in (an `#error` for macros a configuration
    /// sets) still lists what it read; one it cannot read is an error with
    /// the compiler's message.
    pub fn dependencies(&self, job: &CompileJob) -> Result<Vec<PathBuf>, ToolchainError> {
        let mut files: Vec<PathBuf> = Vec::new();
        for source in &job.sources {
            let mut cmd = self.command(job);
            cmd.arg("-M").arg(source);
            let command = crate::render_command(&cmd);
            let out = cmd
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| ToolchainError::Spawn {
                    cc: self.program.clone(),
                    source: e,
                })?;
            let listed = parse_make_deps(&String::from_utf8_lossy(&out.stdout));
            if listed.is_empty() {
                return Err(ToolchainError::BuildFailed {
                    command,
                    stderr: String::from_utf8_lossy(&out.stderr).to_string(),
                });
            }
            for f in listed {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
        Ok(files)
    }

    /// Compiles `job` (one source, `object_only`) into its output, or
    /// copies the object a cache holds for the same inputs. Without a
    /// cache, or for a compiler that does not write dependency files
    /// (neither gcc nor clang), it compiles.
    pub fn compile_object(
        &self,
        job: &CompileJob,
        cache: Option<&BuildCache>,
    ) -> Result<Compiled, ToolchainError> {
        let (Some(cache), [source]) = (cache, job.sources.as_slice()) else {
            return self.compile(job).map(|()| Compiled::Built);
        };
        if !job.object_only || self.kind == CompilerKind::Other {
            return self.compile(job).map(|()| Compiled::Built);
        }
        let source = std::path::absolute(source).map_err(io_err(format!(
            "cannot resolve the source {}",
            source.display()
        )))?;
        let source_dir = source.parent().unwrap_or(Path::new("/")).to_path_buf();
        let Some(key) = self.object_key(job, &source, &source_dir) else {
            return self.compile(job).map(|()| Compiled::Built);
        };
        if cache.lookup(&key, &source_dir, &job.output) {
            tracing::debug!(source = %source.display(), "object reused from the build cache");
            return Ok(Compiled::Reused);
        }
        let deps_file = job.output.with_extension("tdg-deps");
        let mut with_deps = job.clone();
        with_deps.sources = vec![source.clone()];
        with_deps.cflags.extend([
            "-MD".to_string(),
            "-MF".to_string(),
            deps_file.display().to_string(),
        ]);
        self.compile(&with_deps)?;
        let listed = std::fs::read_to_string(&deps_file).unwrap_or_default();
        let _ = std::fs::remove_file(&deps_file);
        let mut deps: Vec<PathBuf> = parse_make_deps(&listed)
            .into_iter()
            .map(|d| std::path::absolute(&d).unwrap_or(d))
            .collect();
        if !deps.contains(&source) {
            deps.insert(0, source.clone());
        }
        cache.store(&key, &job.output, &deps, &source_dir)?;
        Ok(Compiled::Built)
    }

    /// The hash of what a job's object depends on before its headers are
    /// known: `None` when the source cannot be read (the compiler then says
    /// why). Paths equal to the source's directory are written as `.`, so a
    /// generated source in a new scratch directory has the same key.
    fn object_key(&self, job: &CompileJob, source: &Path, source_dir: &Path) -> Option<String> {
        let contents = std::fs::read(source).ok()?;
        let relative = |p: &Path| -> String {
            if p == source_dir {
                ".".into()
            } else {
                p.display().to_string()
            }
        };
        let mut h = Sha256::new();
        let mut field = |s: &[u8]| {
            h.update((s.len() as u64).to_le_bytes());
            h.update(s);
        };
        field(FORMAT.as_bytes());
        field(self.identity.as_bytes());
        for flag in &job.cflags {
            field(flag.as_bytes());
        }
        field(b"--defines");
        for (name, value) in &job.defines {
            field(format!("{name}={}", value.as_deref().unwrap_or("")).as_bytes());
        }
        field(b"--include");
        for dir in &job.include_dirs {
            field(relative(dir).as_bytes());
        }
        field(b"--source");
        field(
            source
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default()
                .as_bytes(),
        );
        field(&contents);
        Some(hex(&h.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn make_dependency_lines_are_split_with_continuations_and_escaped_spaces() {
        let text = "x.o: /a/x.c /usr/include/stdio.h \\\n /a/my\\ header.h\n";
        assert_eq!(
            parse_make_deps(text),
            vec![
                PathBuf::from("/a/x.c"),
                PathBuf::from("/usr/include/stdio.h"),
                PathBuf::from("/a/my header.h"),
            ]
        );
    }

    #[test]
    fn dependencies_list_the_headers_read_even_past_an_error_directive() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("tile.h"), "#define TILE 1\n").unwrap();
        std::fs::write(
            d.join("k.c"),
            "#include \"tile.h\"\n#ifndef NB\n#error \"give NB\"\n#endif\n#include \"late.h\"\n",
        )
        .unwrap();
        std::fs::write(d.join("late.h"), "int late;\n").unwrap();
        let cc = CCompiler::find(None).unwrap();
        let mut job = CompileJob {
            sources: vec![d.join("k.c")],
            include_dirs: vec![d.to_path_buf()],
            ..Default::default()
        };
        // Without NB the preprocessor stops at #error, yet says what it read.
        let read = cc.dependencies(&job).unwrap();
        assert!(read.contains(&d.join("k.c")), "{read:?}");
        assert!(read.contains(&d.join("tile.h")), "{read:?}");
        job.defines = vec![("NB".into(), Some("4".into()))];
        let read = cc.dependencies(&job).unwrap();
        assert!(read.contains(&d.join("late.h")), "{read:?}");
        // A header that does not exist is the compiler's error.
        std::fs::remove_file(d.join("tile.h")).unwrap();
        let e = cc.dependencies(&job).unwrap_err().to_string();
        assert!(e.contains("tile.h"), "{e}");
    }

    #[test]
    fn a_symlink_or_a_file_is_refused_as_the_cache_directory() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        let link = dir.path().join("cache");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = BuildCache::open(&link).unwrap_err().to_string();
        assert!(
            e.contains("symbolic link") && e.contains("TDG_CACHE_DIR"),
            "{e}"
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "mine").unwrap();
        let e = BuildCache::open(&file).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
        let made = dir.path().join("new/builds");
        BuildCache::open(&made).unwrap();
        let mode = std::fs::metadata(&made).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
