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
}

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
        let mut info = CaptureInfo {
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
        };
        let num = |k: &str, v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("bad {k}={v:?} in {CAPTURE_INFO_FILE}"))
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key {
                "status" => info.ok = value == "ok",
                "error" => info.error = Some(value.to_string()),
                "pid" => info.pid = num(key, value)? as u32,
                "exe" => info.exe = PathBuf::from(value),
                "image" => info.image = PathBuf::from(value),
                "api" => {
                    info.api = if value == "pair" {
                        MarkerApi::Pair
                    } else {
                        MarkerApi::Markers
                    }
                }
                "site" => info.site = Some(value.to_string()),
                "call" => info.call = Some(num(key, value)?),
                "delay" => info.delay = Some(num(key, value)?),
                "result_fd" => info.result_fd = num(key, value)? as i32,
                "result_channel" => info.result_channel = value.to_string(),
                "control_channel" => info.control_channel = Some(value.to_string()),
                "fork_samples" => info.fork_samples = value == "1",
                "fd" => {
                    let mut parts = value.splitn(3, ' ');
                    let (Some(fd), Some(flags), Some(target)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        return Err(format!("bad descriptor line {line:?}"));
                    };
                    info.descriptors.push(OpenDescriptor {
                        fd: fd
                            .parse()
                            .map_err(|_| format!("bad descriptor line {line:?}"))?,
                        flags: u32::from_str_radix(flags, 8)
                            .map_err(|_| format!("bad descriptor line {line:?}"))?,
                        target: target.to_string(),
                        tty_key: None,
                    });
                }
                "tty" => {
                    let (fd, devs) = value
                        .split_once(' ')
                        .ok_or_else(|| format!("bad terminal line {line:?}"))?;
                    let fd: i32 = fd
                        .parse()
                        .map_err(|_| format!("bad terminal line {line:?}"))?;
                    if let Some(d) = info.descriptors.iter_mut().find(|d| d.fd == fd) {
                        d.tty_key = Some(format!("tty[{devs}]"));
                    }
                }
                _ => {}
            }
        }
        if info.pid == 0 || !info.result_channel.starts_with("pipe:[") {
            return Err(format!("{CAPTURE_INFO_FILE} is incomplete"));
        }
        Ok(info)
    }
}

/// What a restore gives the copy in place of a descriptor whose other side
/// no longer exists (pipes, terminals) or that would trip CRIU's checks (a
/// file the application rewrites has changed size since the capture).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Substitute {
    /// The copy reads EOF and its writes vanish: a restored copy's output is
    /// a replay, not something the user wants twice.
    DevNull,
    /// A file the application rewrites: an unnamed file (`O_TMPFILE`) in
    /// the same directory, so the copy's writes cost the kernel what the
    /// application's do (on /dev/null they cost nothing, and a short call
    /// after them ran faster in the copy: docs/checkpoint.md, "Fidelity of
    /// short regions"); it has no name and goes with the copy. /dev/null
    /// where the directory cannot hold one.
    ScratchFile { dir: std::path::PathBuf },
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

/// Decide how each captured descriptor is restored. Read-only files and
/// append-only outputs are left to CRIU (their size check passes or does not
/// apply); pipes, terminals and rewritten files are substituted.
pub fn restore_substitutes(info: &CaptureInfo) -> Vec<InheritedDescriptor> {
    let mut out: Vec<InheritedDescriptor> = Vec::new();
    for d in &info.descriptors {
        let access = d.flags & libc::O_ACCMODE as u32;
        let appends = d.flags & libc::O_APPEND as u32 != 0;
        let (key, substitute) = if let Some(tty) = &d.tty_key {
            // The terminal stays with the user's session; copies run without one.
            (tty.clone(), Substitute::DevNull)
        } else if d.target.starts_with("pipe:[") {
            if holds_both_ends(info, &d.target) {
                // CRIU restores a pipe the process holds whole, data included.
                continue;
            }
            (d.target.clone(), Substitute::DevNull)
        } else if d.target.starts_with('/')
            && access != libc::O_RDONLY as u32
            && !appends
            && !is_device(&d.target)
        {
            if d.target.ends_with(" (deleted)") {
                continue;
            }
            let dir = std::path::Path::new(&d.target)
                .parent()
                .unwrap_or(std::path::Path::new("/"))
                .to_path_buf();
            (d.target[1..].to_string(), Substitute::ScratchFile { dir })
        } else {
            continue;
        };
        match out.iter_mut().find(|e| e.key == key) {
            Some(e) => e.app_fds.push(d.fd),
            None => out.push(InheritedDescriptor {
                key,
                substitute,
                app_fds: vec![d.fd],
            }),
        }
    }
    out
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

fn is_device(path: &str) -> bool {
    path.starts_with("/dev/")
}

/// The files the application writes that its copies write to /dev/null
/// instead: none since rewritten files get a scratch file in their
/// directory, unless that directory cannot hold one (pipes and terminals
/// are not files the plain runs write either: `validate` sends their output
/// to /dev/null too).
pub fn discarded_outputs(capture: &CaptureInfo) -> Vec<String> {
    restore_substitutes(capture)
        .into_iter()
        .filter_map(|s| match s.substitute {
            Substitute::ScratchFile { dir } if !scratch_file_possible(&dir) => {
                Some(format!("/{}", s.key))
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
    fn substitutes_pipes_and_rewritten_outputs_only() {
        let info = CaptureInfo::parse(SAMPLE).unwrap();
        let subs = restore_substitutes(&info);
        // the shared pipe once (two fds), the truncating output; not the
        // O_APPEND log, not the read-only input, not /dev/null
        assert_eq!(subs.len(), 3, "{subs:?}");
        assert_eq!(subs[0].key, "pipe:[20646]");
        assert_eq!(subs[0].app_fds, vec![1, 5]);
        assert_eq!(subs[1].key, "tmp/ck/out.txt");
        assert_eq!(
            subs[1].substitute,
            Substitute::ScratchFile {
                dir: "/tmp/ck".into()
            }
        );
        assert_eq!(subs[0].substitute, Substitute::DevNull);
        assert_eq!(subs[2].key, "tty[8803:18]");
    }
}
