//! `tdg-capture.txt`: what the host library writes into the image right after
//! the dump (who was captured, where, and every open descriptor), and the
//! restore policy derived from it.

use crate::error::{CheckpointError, Result};
use std::path::{Path, PathBuf};

pub const CAPTURE_INFO_FILE: &str = "tdg-capture.txt";
pub const DUMP_LOG_FILE: &str = "dump.log";

/// One open descriptor of the captured process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpenDescriptor {
    pub fd: i32,
    /// `open(2)` flags as `/proc/<pid>/fdinfo` shows them.
    pub flags: u32,
    /// The `/proc/<pid>/fd` link target: a path, `pipe:[ino]`, `socket:[ino]`, ...
    pub target: String,
    /// For a terminal, CRIU's name for it: `tty[rdev:dev]` (hex).
    pub tty_key: Option<String>,
    /// The offset at the checkpoint (`fdpos=`; None: an older host library,
    /// or not seekable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pos: Option<u64>,
    /// `st_mode` (`fdmode=`; None: an older host library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MarkerApi {
    /// `tdg_region_begin/end`: tdg chose the call and the delay.
    Markers,
    /// `tdg_enter_checkpoint/tdg_stop_checkpoint` placed by hand.
    Pair,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CaptureInfo {
    pub ok: bool,
    pub error: Option<String>,
    pub pid: u32,
    pub exe: PathBuf,
    /// The image directory as the captured process saw it (CRIU reopens it
    /// there at restore).
    pub image: PathBuf,
    pub api: MarkerApi,
    pub site: Option<String>,
    pub call: Option<u64>,
    pub delay: Option<u64>,
    pub result_fd: i32,
    /// The inherit-fd key of the result pipe's write end, `pipe:[ino]`.
    pub result_channel: String,
    /// The inherit-fd key of the control pipe's read end, `pipe:[ino]`
    /// (images captured before candidates existed have none).
    #[serde(default)]
    pub control_channel: Option<String>,
    /// The host library takes many samples per restore, one fork of the
    /// restored copy each (`schedule=` on the control pipe).
    #[serde(default)]
    pub fork_samples: bool,
    pub descriptors: Vec<OpenDescriptor>,
    /// Files the process can read and write (O_RDWR, or mapped shared and
    /// writable) whose content at the checkpoint the image keeps
    /// (`seed=N PATH`: `tdg-seed-N`; `seed_skipped=PATH`: too large).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<Seed>,
    /// Files mapped shared and writable (`map=PATH`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_maps: Vec<String>,
}

/// A file's content at the checkpoint, kept in the image.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seed {
    pub path: String,
    /// The image's copy (`tdg-seed-N`); None: past the host library's
    /// budget, so a restore copies the file as it is then.
    pub file: Option<String>,
}

/// The prefix of the image's seed files.
pub const SEED_PREFIX: &str = "tdg-seed-";

impl CaptureInfo {
    pub fn read(image: &Path) -> Result<CaptureInfo> {
        let path = image.join(CAPTURE_INFO_FILE);
        let text = std::fs::read_to_string(&path).map_err(|_| CheckpointError::BadImage {
            path: image.to_path_buf(),
            reason: format!(
                "{CAPTURE_INFO_FILE} is missing (the application never reached the checkpoint)"
            ),
        })?;
        CaptureInfo::parse(&text).map_err(|reason| CheckpointError::BadImage {
            path: image.to_path_buf(),
            reason,
        })
    }

    pub fn parse(text: &str) -> std::result::Result<CaptureInfo, String> {
        let mut info = CaptureInfo::unread();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            info.read_line(key, value, line)?;
        }
        if info.pid == 0 || !info.result_channel.starts_with("pipe:[") {
            return Err(format!("{CAPTURE_INFO_FILE} is incomplete"));
        }
        Ok(info)
    }

    /// Before the first line: nothing known.
    fn unread() -> CaptureInfo {
        CaptureInfo {
            ok: false,
            error: None,
            pid: 0,
            exe: PathBuf::new(),
            image: PathBuf::new(),
            api: MarkerApi::Markers,
            site: None,
            call: None,
            delay: None,
            result_fd: -1,
            result_channel: String::new(),
            control_channel: None,
            fork_samples: false,
            descriptors: Vec::new(),
            seeds: Vec::new(),
            shared_maps: Vec::new(),
        }
    }

    /// One `key=value` line (an unknown key is passed over).
    fn read_line(&mut self, key: &str, value: &str, line: &str) -> std::result::Result<(), String> {
        let num = |k: &str, v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("bad {k}={v:?} in {CAPTURE_INFO_FILE}"))
        };
        match key {
            "status" => self.ok = value == "ok",
            "error" => self.error = Some(value.to_string()),
            "pid" => self.pid = num(key, value)? as u32,
            "exe" => self.exe = PathBuf::from(value),
            "image" => self.image = PathBuf::from(value),
            "api" => {
                self.api = if value == "pair" {
                    MarkerApi::Pair
                } else {
                    MarkerApi::Markers
                }
            }
            "site" => self.site = Some(value.to_string()),
            "call" => self.call = Some(num(key, value)?),
            "delay" => self.delay = Some(num(key, value)?),
            "result_fd" => self.result_fd = num(key, value)? as i32,
            "result_channel" => self.result_channel = value.to_string(),
            "control_channel" => self.control_channel = Some(value.to_string()),
            "fork_samples" => self.fork_samples = value == "1",
            "fd" => self.descriptors.push(descriptor(value, line)?),
            "fdpos" | "fdmode" | "tty" => self.read_descriptor_detail(key, value, line)?,
            "seed" => {
                let bad = || format!("bad seed line {line:?}");
                let (n, path) = value.split_once(' ').ok_or_else(bad)?;
                let n: u32 = n.parse().map_err(|_| bad())?;
                self.seeds.push(Seed {
                    path: path.to_string(),
                    file: Some(format!("{SEED_PREFIX}{n}")),
                });
            }
            "seed_skipped" => self.seeds.push(Seed {
                path: value.to_string(),
                file: None,
            }),
            "map" => self.shared_maps.push(value.to_string()),
            _ => {}
        }
        Ok(())
    }

    /// `fdpos=FD POS`, `fdmode=FD MODE` (octal) or `tty=FD DEVS` on a
    /// descriptor an `fd=` line named before (another is passed over).
    fn read_descriptor_detail(
        &mut self,
        key: &str,
        value: &str,
        line: &str,
    ) -> std::result::Result<(), String> {
        let what = if key == "tty" {
            "terminal"
        } else {
            "descriptor"
        };
        let bad = || format!("bad {what} line {line:?}");
        let (fd, v) = value.split_once(' ').ok_or_else(bad)?;
        let fd: i32 = fd.parse().map_err(|_| bad())?;
        let Some(d) = self.descriptors.iter_mut().find(|d| d.fd == fd) else {
            return Ok(());
        };
        match key {
            "fdpos" => d.pos = Some(v.parse().map_err(|_| bad())?),
            "fdmode" => d.mode = Some(u32::from_str_radix(v, 8).map_err(|_| bad())?),
            _ => d.tty_key = Some(format!("tty[{v}]")),
        }
        Ok(())
    }
}

/// An `fd=FD FLAGS TARGET` line's descriptor (flags in octal).
fn descriptor(value: &str, line: &str) -> std::result::Result<OpenDescriptor, String> {
    let bad = || format!("bad descriptor line {line:?}");
    let mut parts = value.splitn(3, ' ');
    let (Some(fd), Some(flags), Some(target)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok(OpenDescriptor {
        fd: fd.parse().map_err(|_| bad())?,
        flags: u32::from_str_radix(flags, 8).map_err(|_| bad())?,
        target: target.to_string(),
        tty_key: None,
        pos: None,
        mode: None,
    })
}

/// What a restore gives a restored copy in place of what the application
/// had, so that nothing a copy does reaches the user's world and CRIU's
/// checks pass: `--inherit-fd fd[N]:KEY` hands CRIU one descriptor for
/// every open file (and mapping) known by KEY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Substitute {
    /// The copy reads EOF and its writes vanish: a pipe whose other end is
    /// gone, a terminal of the user's session.
    DevNull,
    /// A private file made for each restore, which the copies write
    /// instead of the user's.
    Private(PrivateFile),
}

/// How a restore makes a copy's private file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateFile {
    /// The user's file, absolute.
    pub path: String,
    /// Opened for reading too (some descriptor of it read-write, or a
    /// shared mapping): seeded with the content.
    pub read: bool,
    /// Every descriptor of it appends.
    pub append: bool,
    /// The offset a descriptor had at the checkpoint.
    pub offset: u64,
    pub seed: SeedFrom,
}

/// What a private file starts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedFrom {
    /// Nothing to read: as long as the file was (sparse), so offsets and
    /// sizes the copy sees are the application's.
    Size,
    /// The content at the checkpoint, kept in the image (`tdg-seed-N`).
    Image(String),
    /// The file as it is at the restore: its content at the checkpoint
    /// was past the host library's budget, or an older host library kept
    /// none.
    Current,
}

/// One `--inherit-fd fd[N]:KEY` the restore needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InheritedDescriptor {
    /// CRIU's identifier: `pipe:[ino]`, or a path without its leading `/`.
    pub key: String,
    pub substitute: Substitute,
    /// The application descriptor(s) it stands for (for messages).
    pub app_fds: Vec<i32>,
}

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;

/// The memory devices a fresh open of is the same thing: kept as they are.
pub fn is_memory_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/zero" | "/dev/full" | "/dev/random" | "/dev/urandom"
    )
}

/// A path that names a regular file: by its mode when the host library
/// recorded it, else by where it is (`/dev/` holds devices, except the
/// tmpfs file systems mounted there).
fn is_regular(d: &OpenDescriptor) -> bool {
    match d.mode {
        Some(mode) => mode & S_IFMT == S_IFREG,
        None => {
            d.target.starts_with('/')
                && (!d.target.starts_with("/dev/")
                    || d.target.starts_with("/dev/shm/")
                    || d.target.starts_with("/dev/mqueue/"))
        }
    }
}

fn writes(d: &OpenDescriptor) -> bool {
    d.flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32
}

/// Decide how each captured descriptor (and shared file mapping) is
/// restored: every regular file the application can write gets a private
/// copy (appends and writes stay in it; one it can also read starts with
/// its content at the checkpoint), pipes whose other end is gone and
/// terminals get /dev/null (the terminal is replaced by a fresh one, see
/// `RestorePlan`); read-only files, devices and pipes held whole are left
/// to CRIU.
pub fn restore_substitutes(info: &CaptureInfo) -> Vec<InheritedDescriptor> {
    let mut out: Vec<InheritedDescriptor> = Vec::new();
    let mut add = |key: String, substitute: Substitute, fd: Option<i32>| match out
        .iter_mut()
        .find(|e| e.key == key)
    {
        Some(e) => e.app_fds.extend(fd),
        None => out.push(InheritedDescriptor {
            key,
            substitute,
            app_fds: fd.into_iter().collect(),
        }),
    };
    for d in &info.descriptors {
        if let Some(tty) = &d.tty_key {
            // The terminal stays with the user's session; copies run without one.
            add(tty.clone(), Substitute::DevNull, Some(d.fd));
        } else if d.target.starts_with("pipe:[") {
            // CRIU restores a pipe the process holds whole, data included.
            if !holds_both_ends(info, &d.target) {
                add(d.target.clone(), Substitute::DevNull, Some(d.fd));
            }
        } else if is_regular(d) && !d.target.ends_with(" (deleted)") && written(info, &d.target) {
            add(
                d.target[1..].to_string(),
                Substitute::Private(private_file(info, &d.target)),
                Some(d.fd),
            );
        }
    }
    for path in &info.shared_maps {
        if let Some(key) = path.strip_prefix('/') {
            add(
                key.to_string(),
                Substitute::Private(private_file(info, path)),
                None,
            );
        }
    }
    out
}

/// Some descriptor of `path` writes, or the process maps it shared and
/// writable: CRIU hands every descriptor of a path the same file, so all
/// of them get the private copy.
fn written(info: &CaptureInfo, path: &str) -> bool {
    info.shared_maps.iter().any(|m| m == path)
        || info
            .descriptors
            .iter()
            .any(|d| d.target == path && writes(d))
}

fn private_file(info: &CaptureInfo, path: &str) -> PrivateFile {
    let fds: Vec<&OpenDescriptor> = info
        .descriptors
        .iter()
        .filter(|d| d.target == path)
        .collect();
    let mapped = info.shared_maps.iter().any(|m| m == path);
    let read = mapped
        || fds
            .iter()
            .any(|d| d.flags & libc::O_ACCMODE as u32 != libc::O_WRONLY as u32);
    let append =
        !mapped && !fds.is_empty() && fds.iter().all(|d| d.flags & libc::O_APPEND as u32 != 0);
    let seed = if !read {
        SeedFrom::Size
    } else {
        match info
            .seeds
            .iter()
            .find(|s| s.path == path)
            .and_then(|s| s.file.clone())
        {
            Some(file) => SeedFrom::Image(file),
            None => SeedFrom::Current,
        }
    };
    PrivateFile {
        path: path.to_string(),
        read,
        append,
        offset: fds.iter().find_map(|d| d.pos).unwrap_or(0),
        seed,
    }
}

/// The process holds a read end and a write end of this pipe.
fn holds_both_ends(info: &CaptureInfo, pipe: &str) -> bool {
    let has = |mode: i32| {
        info.descriptors
            .iter()
            .any(|d| d.target == pipe && d.flags & libc::O_ACCMODE as u32 == mode as u32)
    };
    has(libc::O_RDONLY) && has(libc::O_WRONLY)
}

/// The files the application writes whose copies' private files cannot
/// live beside them (their directory cannot hold an unnamed file), so the
/// copies write them in tdg's work directory, on another file system (pipes
/// and terminals are not files the plain runs write either: `validate`
/// sends their output to /dev/null too).
pub fn discarded_outputs(capture: &CaptureInfo) -> Vec<String> {
    restore_substitutes(capture)
        .into_iter()
        .filter_map(|s| match s.substitute {
            Substitute::Private(p)
                if !scratch_file_possible(
                    Path::new(&p.path).parent().unwrap_or(Path::new("/")),
                ) =>
            {
                Some(p.path)
            }
            _ => None,
        })
        .collect()
}

fn scratch_file_possible(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "status=ok\npid=14182\nexe=/tmp/ck/app\napi=markers\nsite=chase\ncall=5\ndelay=2\n\
result_fd=1000\nresult_channel=pipe:[20647]\nfd=0 100000 /dev/null\nfd=1 1 pipe:[20646]\n\
fd=2 102001 /tmp/log.txt\nfd=3 100001 /tmp/ck/out.txt\nfd=4 100000 /tmp/in.dat\nfd=5 1 pipe:[20646]\n\
fd=6 2 /dev/pts/3\ntty=6 8803:18\n";

    #[test]
    fn parses_capture_info() {
        let info = CaptureInfo::parse(SAMPLE).unwrap();
        assert!(info.ok);
        assert_eq!(info.pid, 14182);
        assert_eq!(info.site.as_deref(), Some("chase"));
        assert_eq!((info.call, info.delay), (Some(5), Some(2)));
        assert_eq!(info.descriptors.len(), 7);
        assert_eq!(info.descriptors[6].tty_key.as_deref(), Some("tty[8803:18]"));
        assert_eq!(info.descriptors[2].flags, 0o102001);
        assert!(CaptureInfo::parse("status=ok\n").is_err());
    }

    #[test]
    fn every_file_the_application_writes_gets_a_private_copy() {
        let info = CaptureInfo::parse(SAMPLE).unwrap();
        let subs = restore_substitutes(&info);
        // the shared pipe once (two fds), the O_APPEND log and the
        // truncating output each a private file, the terminal; not the
        // read-only input, not /dev/null
        let keys: Vec<&str> = subs.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "pipe:[20646]",
                "tmp/log.txt",
                "tmp/ck/out.txt",
                "tty[8803:18]"
            ],
            "{subs:?}"
        );
        assert_eq!(subs[0].app_fds, vec![1, 5]);
        match &subs[1].substitute {
            Substitute::Private(p) => {
                assert!(p.append && !p.read && p.seed == SeedFrom::Size, "{p:?}")
            }
            other => panic!("{other:?}"),
        }
        // A read-write file is seeded from the image when the host library
        // kept its content, else from the file as it is.
        let rw = CaptureInfo::parse(&format!(
            "{SAMPLE}fd=7 100002 /tmp/db.bin\nfdpos=7 16\nseed=0 /tmp/db.bin\nfd=8 100002 /tmp/big.bin\nseed_skipped=/tmp/big.bin\n"
        ))
        .unwrap();
        let private = |key: &str| {
            restore_substitutes(&rw)
                .into_iter()
                .find(|s| s.key == key)
                .and_then(|s| match s.substitute {
                    Substitute::Private(p) => Some(p),
                    _ => None,
                })
                .unwrap()
        };
        let db = private("tmp/db.bin");
        assert!(db.read && !db.append && db.offset == 16, "{db:?}");
        assert_eq!(db.seed, SeedFrom::Image("tdg-seed-0".into()));
        assert_eq!(private("tmp/big.bin").seed, SeedFrom::Current);
    }
}
