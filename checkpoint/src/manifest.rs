//! The image manifest (`tdg-manifest.json`): what was captured (site, call,
//! delay), from which binary, and checksums of every image file, so `time`
//! can refuse an image that was corrupted or whose binary was rebuilt.

use crate::capture_info::{CaptureInfo, CAPTURE_INFO_FILE};
use crate::error::{guard_err, io_err, CheckpointError, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where a capture keeps its `preload` shim: inside the image, so the image
/// stays restorable on its own.
pub const PRELOAD_DIR: &str = "preload";

/// What a checkpoint image directory is to the guard: tdg empties one only
/// when an earlier capture made it.
pub const IMAGE_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "checkpoint image",
    option: "-o",
};

pub const MANIFEST_FILE: &str = "tdg-manifest.json";
pub const MANIFEST_FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub tdg_version: String,
    pub created_unix: u64,
    pub command: Vec<String>,
    pub cwd: PathBuf,
    /// The captured binary and its identity.
    pub exe: PathBuf,
    pub exe_size: u64,
    pub exe_sha256: String,
    pub site: Option<String>,
    pub call: Option<u64>,
    pub delay: Option<u64>,
    pub criu_version: String,
    pub capture: CaptureInfo,
    pub files: Vec<ImageFile>,
    /// The timed call as the captured application itself ran it, after the
    /// dump (None: an older host library, or the pair API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_call: Option<CapturedCall>,
}

/// The original process's own time of the call the copies time: one
/// observation of the application, recorded with the image.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CapturedCall {
    pub ns: u64,
    pub cpu_ns: u64,
    /// Minor page faults inside the call: after its dump the original
    /// faults some of its pages back in, which the samples do not.
    #[serde(default)]
    pub minflt: u64,
    /// The state the call ran in (None: an older host library).
    #[serde(default)]
    pub state: Option<crate::fidelity::CallState>,
}

/// Where the original writes [`CapturedCall`] (tdg_checkpoint.c, CAPTURED_CALL).
pub const CAPTURED_CALL_FILE: &str = "tdg-captured-call.txt";

impl CapturedCall {
    /// The record the original wrote into `image`, if it reached the call.
    pub fn read(image: &Path) -> Option<CapturedCall> {
        let text = std::fs::read_to_string(image.join(CAPTURED_CALL_FILE)).ok()?;
        let (ns, cpu_ns) = crate::hostlib::parse_result(&text)?;
        let minflt = text
            .split_whitespace()
            .find_map(|f| f.strip_prefix("minflt="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Some(CapturedCall {
            ns,
            cpu_ns,
            minflt,
            state: text.lines().find_map(crate::fidelity::CallState::parse),
        })
    }
}

/// Refuses an image directory, or a file in it, that anyone but this user
/// could have changed (another owner, group- or world-writable, a link):
/// restoring an image runs what it holds as root, and its manifest's
/// checksums are no defence against whoever can rewrite both.
pub fn refuse_untrusted(image: &Path) -> Result<()> {
    fsguard::refuse_shared(image, IMAGE_DIR).map_err(guard_err)?;
    let mut paths = Vec::new();
    for dir in [image.to_path_buf(), image.join(PRELOAD_DIR)] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        paths.extend(entries.flatten().map(|e| e.path()));
    }
    for path in paths {
        let what = fsguard::Purpose {
            what: "checkpoint image file",
            option: "-o (recapture the image)",
        };
        fsguard::refuse_shared(&path, what).map_err(guard_err)?;
    }
    Ok(())
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).map_err(io_err(format!("cannot read {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(io_err(format!("cannot read {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The files that make up the image proper: CRIU's `*.img`, the capture
/// record and the seeds of the files the copies get private copies of
/// (logs and the manifest itself are not part of it).
fn image_file_names(image: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(image).map_err(io_err(format!("cannot list {}", image.display())))?
    {
        let entry = entry.map_err(io_err(format!("cannot list {}", image.display())))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".img")
            || name == CAPTURE_INFO_FILE
            || name.starts_with(crate::capture_info::SEED_PREFIX)
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

pub fn checksum_image(image: &Path) -> Result<Vec<ImageFile>> {
    image_file_names(image)?
        .into_iter()
        .map(|name| {
            let path = image.join(&name);
            let size = std::fs::metadata(&path)
                .map_err(io_err(format!("cannot stat {}", path.display())))?
                .len();
            Ok(ImageFile {
                sha256: sha256_file(&path)?,
                name,
                size,
            })
        })
        .collect()
}

impl Manifest {
    pub fn write(&self, image: &Path) -> Result<()> {
        let path = image.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self).expect("manifest serializes");
        fsguard::write_atomic(&path, (text + "\n").as_bytes()).map_err(guard_err)
    }

    pub fn read(image: &Path) -> Result<Manifest> {
        let bad = |reason: String| CheckpointError::BadImage {
            path: image.to_path_buf(),
            reason,
        };
        if !image.is_dir() {
            return Err(bad("no such directory".into()));
        }
        let path = image.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|_| {
            bad(format!(
                "{MANIFEST_FILE} is missing; capture images with `tdg checkpoint capture`"
            ))
        })?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| bad(format!("{MANIFEST_FILE} is unreadable: {e}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(bad(format!(
                "manifest format {} (this tdg reads {MANIFEST_FORMAT}); recapture it",
                manifest.format
            )));
        }
        Ok(manifest)
    }

    /// Check the image files and the captured binary against the manifest.
    pub fn verify(&self, image: &Path) -> Result<()> {
        let bad = |reason: String| CheckpointError::BadImage {
            path: image.to_path_buf(),
            reason,
        };
        let now = checksum_image(image)?;
        for want in &self.files {
            match now.iter().find(|f| f.name == want.name) {
                None => return Err(bad(format!("{} is missing", want.name))),
                Some(have) if have.sha256 != want.sha256 => {
                    return Err(bad(format!(
                        "{} does not match its checksum (corrupted or edited)",
                        want.name
                    )))
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = now
            .iter()
            .find(|f| !self.files.iter().any(|w| w.name == f.name))
        {
            return Err(bad(format!(
                "{} is not part of the captured image",
                extra.name
            )));
        }
        // The size first: a binary of another size has changed without
        // reading it, and a damaged manifest naming a huge file (a disk
        // image, /proc/kcore) is refused at once instead of hashed.
        let now = match std::fs::metadata(&self.exe) {
            Ok(m) if m.is_file() && m.len() != self.exe_size => Some(format!(
                "? ({} bytes, {} when captured)",
                m.len(),
                self.exe_size
            )),
            Ok(m) if m.is_file() => {
                let hash = sha256_file(&self.exe)?;
                (hash != self.exe_sha256).then(|| short(&hash))
            }
            _ => Some("missing".to_string()),
        };
        if let Some(now) = now {
            return Err(CheckpointError::BinaryChanged {
                image: image.to_path_buf(),
                exe: self.exe.clone(),
                then: short(&self.exe_sha256),
                now,
            });
        }
        Ok(())
    }

    pub fn image_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(exe: &Path, exe_size: u64) -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            tdg_version: "test".into(),
            created_unix: 0,
            command: vec!["app".into()],
            cwd: "/".into(),
            exe: exe.to_path_buf(),
            exe_size,
            exe_sha256: "0".repeat(64),
            site: None,
            call: None,
            delay: None,
            criu_version: "4.1.1".into(),
            capture: CaptureInfo::parse("status=ok\npid=1\nresult_channel=pipe:[1]\n").unwrap(),
            files: Vec::new(),
            captured_call: None,
        }
    }

    /// A damaged manifest naming a huge file is refused by its size, not
    /// hashed (a terabyte of sparse file would take an hour to read).
    #[test]
    fn a_binary_of_another_size_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("huge");
        std::fs::File::create(&exe)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let image = dir.path().join("img");
        std::fs::create_dir(&image).unwrap();
        let started = std::time::Instant::now();
        let e = manifest(&exe, 17_000).verify(&image).unwrap_err();
        assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
        match e {
            CheckpointError::BinaryChanged { now, .. } => {
                assert!(
                    now.contains("1099511627776 bytes, 17000 when captured"),
                    "{now}"
                )
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_binary_of_the_recorded_size_is_still_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("app");
        std::fs::write(&exe, b"binary").unwrap();
        let image = dir.path().join("img");
        std::fs::create_dir(&image).unwrap();
        let mut m = manifest(&exe, 6);
        match m.verify(&image).unwrap_err() {
            CheckpointError::BinaryChanged { now, .. } => assert_eq!(now.len(), 12, "{now}"),
            other => panic!("{other}"),
        }
        m.exe_sha256 = sha256_file(&exe).unwrap();
        m.verify(&image).unwrap();
    }
}
