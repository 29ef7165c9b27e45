//! Where the probe result is kept, and how it is read back and written:
//! a per-user file tdg only trusts when it owns it, re-measured when stale,
//! damaged or from another CPU.

use crate::documented;
use crate::error::ProbeError;
use crate::result::{ProbeResult, RESULT_VERSION};
use crate::validate;
use std::path::{Path, PathBuf};

/// Where the probe result is kept: `$TDG_CACHE_DIR/probe.json`, else
/// `$XDG_CACHE_HOME/tdg/probe.json`, else `~/.cache/tdg/probe.json` (the
/// home directory from `$HOME`, else from the password database), else a
/// private per-user directory `tdg-<uid>` under the temporary directory.
pub fn cache_path() -> PathBuf {
    cache_path_with(|k| std::env::var_os(k))
}

/// The build cache beside the probe's result: `$TDG_CACHE_DIR/builds`,
/// else `~/.cache/tdg/builds` (as [`cache_path`] finds the directory).
pub fn build_cache_path() -> PathBuf {
    cache_path().with_file_name("builds")
}

/// [`cache_path`] with the environment supplied by the caller.
pub fn cache_path_with(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = nonempty("TDG_CACHE_DIR") {
        return d.join("probe.json");
    }
    if let Some(d) = nonempty("XDG_CACHE_HOME").or_else(|| {
        nonempty("HOME")
            .or_else(home_from_passwd)
            .map(|h| h.join(".cache"))
    }) {
        return d.join("tdg").join("probe.json");
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    nonempty("TMPDIR")
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join(format!("tdg-{uid}"))
        .join("probe.json")
}

/// This user's home directory from the password database.
fn home_from_passwd() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r writes at
    // most buf.len() bytes into buf and points the fields into it.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::geteuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        if rc != 0 || found.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let dir = std::ffi::CStr::from_ptr(pw.pw_dir).to_bytes();
        (!dir.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    }
}

/// Why a file or directory the cache lives in is not trusted: it must be
/// this user's and writable by no one else. `None`: trusted.
fn untrusted(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Some(format!(
            "owned by uid {}, not by this user (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "writable by other users (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

fn refused(path: &Path, why: String) -> ProbeError {
    ProbeError::CacheFile {
        path: path.to_path_buf(),
        cause: std::io::Error::other(format!("not trusted: {why}")),
    }
}

/// Makes the cache directory (mode 0700) if it is missing, and refuses
/// one that is a link, not a directory, or not this user's alone.
fn ensure_cache_dir(dir: &Path) -> Result<(), ProbeError> {
    use std::os::unix::fs::DirBuilderExt;
    let err = |cause| ProbeError::CacheFile {
        path: dir.to_path_buf(),
        cause,
    };
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err)?;
        }
        Err(e) => return Err(err(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(err)?;
    if !meta.is_dir() {
        return Err(refused(
            dir,
            "a link or a file where the cache directory should be".into(),
        ));
    }
    match untrusted(&meta) {
        Some(why) => Err(refused(dir, why)),
        None => Ok(()),
    }
}

/// Largest probe file read back: a real one is tens of KiB.
const MAX_CACHE_BYTES: u64 = 16 << 20;

/// The cached result when it exists, was made by this version of the probe
/// and on this CPU model and passes [`validate::check`]; `None` otherwise (a
/// stale or corrupt file is not an error: it is measured again, said in one
/// line). A cache file that is a link, not a regular file, not this user's
/// or writable by others is refused: an error that names the way out.
pub fn load_cached_from(path: &Path) -> Result<Option<ProbeResult>, ProbeError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |cause| ProbeError::CacheFile {
        path: path.to_path_buf(),
        cause,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        // Not through a link; and a FIFO planted there must not block.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused(path, "a symbolic link".into()))
        }
        Err(cause) => return Err(err(cause)),
    };
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(refused(path, "not a regular file".into()));
    }
    if let Some(why) = untrusted(&meta) {
        return Err(refused(path, why));
    }
    let mut text = String::new();
    if let Err(e) = file.take(MAX_CACHE_BYTES + 1).read_to_string(&mut text) {
        tracing::warn!(
            "ignoring the unreadable probe cache {}: {e}; it is measured again",
            path.display()
        );
        return Ok(None);
    }
    if text.len() as u64 > MAX_CACHE_BYTES {
        tracing::warn!(
            "ignoring the probe cache {}: larger than {} bytes, not a probe result; it is measured again",
            path.display(),
            MAX_CACHE_BYTES
        );
        return Ok(None);
    }
    // A file from another version of the probe is stale, not broken: check
    // the version before insisting on this version's layout.
    let version = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("version").and_then(serde_json::Value::as_u64));
    if version.is_some_and(|v| v != u64::from(RESULT_VERSION)) {
        return Ok(None);
    }
    match serde_json::from_str::<ProbeResult>(&text) {
        Ok(r) if r.version == RESULT_VERSION && r.cpu_model == documented::cpu_model() => {
            match validate::check(&r) {
                Ok(()) => Ok(Some(r)),
                Err(why) => {
                    tracing::warn!(
                        "ignoring the probe cache {}: {why}; it is measured again",
                        path.display()
                    );
                    Ok(None)
                }
            }
        }
        Ok(_) => Ok(None),
        Err(e) => {
            tracing::warn!(
                "ignoring the unreadable probe cache {}: {e}; it is measured again",
                path.display()
            );
            Ok(None)
        }
    }
}

/// Writes the result atomically (a private temporary renamed over the
/// file, never through a link: `fsguard`) into a directory that is this
/// user's alone, so a concurrent reader never sees half a file and no
/// other user can plant one.
pub fn save_to(result: &ProbeResult, path: &Path) -> Result<(), ProbeError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        ensure_cache_dir(dir)?;
    }
    let json = serde_json::to_string_pretty(result).expect("probe results serialise");
    fsguard::write_atomic_mode(path, json.as_bytes(), 0o600).map_err(|cause| {
        ProbeError::CacheFile {
            path: path.to_path_buf(),
            cause,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::samples::sample;
    use crate::result::TscInfo;
    use std::ffi::OsString;

    #[test]
    fn cache_dir_env_wins_then_xdg_then_home() {
        let env = |pairs: Vec<(&'static str, &'static str)>| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| OsString::from(p.1))
        };
        assert_eq!(
            cache_path_with(env(vec![("TDG_CACHE_DIR", "/a"), ("XDG_CACHE_HOME", "/b")])),
            PathBuf::from("/a/probe.json")
        );
        assert_eq!(
            cache_path_with(env(vec![("XDG_CACHE_HOME", "/b"), ("HOME", "/h")])),
            PathBuf::from("/b/tdg/probe.json")
        );
        assert_eq!(
            cache_path_with(env(vec![("TDG_CACHE_DIR", ""), ("HOME", "/h")])),
            PathBuf::from("/h/.cache/tdg/probe.json")
        );
    }

    #[test]
    fn cache_round_trips_and_rejects_stale_or_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/probe.json");
        assert_eq!(load_cached_from(&path).unwrap(), None);
        let r = sample();
        save_to(&r, &path).unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), Some(r.clone()));

        let mut old = r.clone();
        old.version = RESULT_VERSION + 1;
        save_to(&old, &path).unwrap();
        assert_eq!(
            load_cached_from(&path).unwrap(),
            None,
            "other version is re-measured"
        );

        let mut elsewhere = r;
        elsewhere.cpu_model = "some other CPU".into();
        save_to(&elsewhere, &path).unwrap();
        assert_eq!(
            load_cached_from(&path).unwrap(),
            None,
            "other machine is re-measured"
        );

        std::fs::write(&path, "{ not json").unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), None);
    }

    /// Issue 23: a cached point at x = 0 made `--svg` loop ~10^9 times.
    #[test]
    fn a_corrupt_cache_is_treated_as_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        type Spoil = (&'static str, fn(&mut ProbeResult));
        let spoil: [Spoil; 6] = [
            ("x = 0", |r| r.cache_curve[0].x = 0),
            ("unsorted", |r| r.cache_curve.swap(3, 4)),
            ("negative latency", |r| r.caches[1].latency_ns = -2.0),
            ("zero line", |r| r.line.bytes = 0),
            ("absurd size", |r| r.caches[2].effective_bytes = u64::MAX),
            ("infinite TSC", |r| {
                r.tsc = Some(TscInfo {
                    measured_ghz: 1e300,
                    documented_ghz: None,
                    documented_source: None,
                })
            }),
        ];
        for (what, f) in spoil {
            let mut r = sample();
            f(&mut r);
            assert!(validate::check(&r).is_err(), "{what}");
            std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(load_cached_from(&path).unwrap(), None, "{what}");
        }
        // A NaN is written as null: unreadable, likewise no cache.
        let mut r = sample();
        r.memory_latency_ns = f64::NAN;
        std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(load_cached_from(&path).unwrap(), None);
        assert!(validate::check(&sample()).is_ok());
    }

    /// Issue 23: with neither HOME nor XDG_CACHE_HOME the cache was the
    /// shared `/tmp/tdg`.
    #[test]
    fn without_home_the_cache_is_private_to_the_user() {
        let path = cache_path_with(|_| None);
        assert_ne!(path, std::env::temp_dir().join("tdg/probe.json"));
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let from_passwd = home_from_passwd().map(|h| h.join(".cache/tdg/probe.json"));
        assert!(
            Some(&path) == from_passwd.as_ref()
                || path == Path::new(&format!("/tmp/tdg-{uid}/probe.json")),
            "{}",
            path.display()
        );
    }

    /// Issue 23: a planted probe.json was trusted and the cache written
    /// through a predictable temporary with `fs::write`.
    #[test]
    fn a_planted_cache_is_refused_and_never_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.json");
        save_to(&sample(), &path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(load_cached_from(&path).unwrap(), Some(sample()));

        // Writable by others.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = load_cached_from(&path).unwrap_err().to_string();
        assert!(
            err.contains("writable by other users") && err.contains("TDG_CACHE_DIR"),
            "{err}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();

        // Another user's file (the tests run as root, which can make one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
            let err = load_cached_from(&path).unwrap_err().to_string();
            assert!(err.contains("owned by uid 12345"), "{err}");
        } else {
            eprintln!("SKIPPED the other-owner case: needs root to chown");
        }
        std::fs::remove_file(&path).unwrap();

        // A link to a file elsewhere: neither read nor written through.
        let elsewhere = dir.path().join("victim");
        std::fs::write(&elsewhere, "precious").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let err = load_cached_from(&path).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(save_to(&sample(), &path).is_err());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "precious");

        // A directory others may write into is refused; a missing one is
        // made private.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = save_to(&sample(), &shared.join("probe.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("writable by other users"), "{err}");
        assert!(!shared.join("probe.json").exists());
        let fresh = dir.path().join("a/b");
        save_to(&sample(), &fresh.join("probe.json")).unwrap();
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn unwritable_cache_says_how_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let err = save_to(&sample(), &blocker.join("probe.json")).unwrap_err();
        assert!(err.to_string().contains("TDG_CACHE_DIR"), "{err}");
    }
}
