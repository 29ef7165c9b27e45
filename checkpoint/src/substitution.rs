//! What a restored copy gets in place of each file the application had
//! open, said: `tdg checkpoint info` lists every descriptor and shared file
//! mapping with what the copies get; `time`, `validate`, `run` and `tune`
//! warn, once per image and command, about those that change what the
//! region may observe (a file it reads and writes replaced by a private
//! copy, a pipe closed, a device kept). The decisions themselves are
//! `capture_info::restore_substitutes`'s; this module puts them in words.

use crate::capture_info::{
    is_memory_device, restore_substitutes, CaptureInfo, OpenDescriptor, SeedFrom, Substitute,
};
use std::path::Path;

/// What happens to one of the application's files in the copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Treatment {
    /// Written only: a private file of the same size takes the writes.
    PrivateCopy,
    /// Read and written: a private copy seeded with its content.
    ReadWriteReplaced,
    /// A pipe whose other end is gone: /dev/null.
    PipeClosed,
    /// A terminal: a fresh pseudo-terminal.
    TerminalReplaced,
    /// A pipe the process holds both ends of: restored with its data.
    PipeRestored,
    /// A device other than the memory devices, open for writing: kept.
    DeviceKept,
    /// A socket: restored by CRIU as it was.
    SocketRestored,
    /// Read only, a memory device, or kernel state CRIU restores whole.
    Kept,
}

impl Treatment {
    /// Whether the region may observe something the application would not
    /// (a read seeing the checkpoint's content and not what the
    /// application wrote since, end of file on a pipe) or the copies reach
    /// something outside them (a device): said as a warning.
    pub fn warns(self) -> bool {
        matches!(
            self,
            Treatment::ReadWriteReplaced | Treatment::PipeClosed | Treatment::DeviceKept
        )
    }
}

/// One of the application's open files and what the copies get instead.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Substitution {
    /// The application's descriptors (empty: a shared mapping only).
    pub fds: Vec<i32>,
    /// The file, pipe, socket or device as `/proc/PID/fd` named it.
    pub target: String,
    pub treatment: Treatment,
    /// What that means, in words.
    pub says: String,
}

impl Substitution {
    /// `fd 3 /tmp/run.log` or `mapping of /tmp/table.bin`.
    pub fn what(&self) -> String {
        match self.fds.as_slice() {
            [] => format!("mapping of {}", self.target),
            [fd] => format!("fd {fd} {}", self.target),
            fds => format!(
                "fds {} {}",
                fds.iter()
                    .map(|f| f.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                self.target
            ),
        }
    }
}

fn access_text(d: &OpenDescriptor) -> &'static str {
    let append = d.flags & libc::O_APPEND as u32 != 0;
    match (d.flags & libc::O_ACCMODE as u32, append) {
        (a, true) if a == libc::O_RDWR as u32 => "read-write, appending",
        (a, false) if a == libc::O_RDWR as u32 => "read-write",
        (a, true) if a == libc::O_WRONLY as u32 => "appending",
        (a, false) if a == libc::O_WRONLY as u32 => "write-only",
        _ => "read-only",
    }
}

/// Every descriptor and shared file mapping of the capture, with what the
/// copies get, in descriptor order.
pub fn substitutions(info: &CaptureInfo) -> Vec<Substitution> {
    let inherited = restore_substitutes(info);
    let mut out: Vec<Substitution> = Vec::new();
    for d in &info.descriptors {
        let key = d
            .tty_key
            .clone()
            .unwrap_or_else(|| d.target.strip_prefix('/').unwrap_or(&d.target).to_string());
        let substitute = inherited
            .iter()
            .find(|i| i.key == key || i.key == d.target)
            .map(|i| &i.substitute);
        let (treatment, says) = match substitute {
            Some(s) => substituted(d, s),
            None => restored(d),
        };
        add(&mut out, Some(d.fd), &d.target, treatment, says);
    }
    for path in &info.shared_maps {
        if out.iter().any(|s| &s.target == path) {
            continue;
        }
        add(
            &mut out,
            None,
            path,
            Treatment::ReadWriteReplaced,
            "mapped shared and writable: each restore maps the copies a private copy holding \
             its content at the checkpoint (their writes never reach the file)"
                .to_string(),
        );
    }
    out
}

/// `fd` (None: a mapping) joins the entry of the same file treated the same
/// way, or starts one.
fn add(
    out: &mut Vec<Substitution>,
    fd: Option<i32>,
    target: &str,
    treatment: Treatment,
    says: String,
) {
    match out
        .iter_mut()
        .find(|s| s.target == target && s.treatment == treatment)
    {
        Some(s) => s.fds.extend(fd),
        None => out.push(Substitution {
            fds: fd.into_iter().collect(),
            target: target.to_string(),
            treatment,
            says,
        }),
    }
}

/// What the copies get for descriptor `d`, which the restore replaces with
/// `substitute`, in words.
fn substituted(d: &OpenDescriptor, substitute: &Substitute) -> (Treatment, String) {
    match substitute {
        Substitute::DevNull if d.tty_key.is_some() => (
            Treatment::TerminalReplaced,
            "a terminal: the copies get a fresh pseudo-terminal of their own (their output \
             is discarded; a read waits)"
                .to_string(),
        ),
        Substitute::DevNull => (
            Treatment::PipeClosed,
            "a pipe whose other end is gone: the copies get /dev/null in its place (their \
             writes vanish, a read sees end of file)"
                .to_string(),
        ),
        Substitute::Private(p) if p.read => (
            Treatment::ReadWriteReplaced,
            format!(
                "{}: each restore gives the copies a private copy holding {} (reads see that, \
                 writes stay in the copy; the file itself is never written)",
                access_text(d),
                match &p.seed {
                    SeedFrom::Image(_) => "its content at the checkpoint, kept in the image",
                    _ =>
                        "its content at the restore (the image keeps no copy: larger than \
                          256 MiB, or an older host library), which may differ from the \
                          checkpoint's",
                }
            ),
        ),
        Substitute::Private(_) => (
            Treatment::PrivateCopy,
            format!(
                "{}: each restore gives the copies a private file of its size at the \
                 checkpoint, which takes their writes (the file itself is never written)",
                access_text(d)
            ),
        ),
    }
}

/// What the copies get for descriptor `d`, which CRIU restores as it was,
/// in words.
fn restored(d: &OpenDescriptor) -> (Treatment, String) {
    let writes = d.flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32;
    match d.target.as_str() {
        t if t.starts_with("pipe:[") => (
            Treatment::PipeRestored,
            "a pipe the process holds both ends of: restored with the data in it".to_string(),
        ),
        t if t.starts_with("socket:[") => (
            Treatment::SocketRestored,
            "a socket within the process: restored by CRIU as the application had it (a \
             connection to another process or host stops the capture)"
                .to_string(),
        ),
        t if t.starts_with("/dev/") && !is_memory_device(t) && writes => (
            Treatment::DeviceKept,
            format!(
                "a device, {}: kept, so the copies reach the device itself",
                access_text(d)
            ),
        ),
        t if is_memory_device(t) => (Treatment::Kept, "a memory device: kept".to_string()),
        t if t.ends_with(" (deleted)") => (
            Treatment::Kept,
            "deleted before the checkpoint: CRIU restores the copies' own copy of it from \
             the image"
                .to_string(),
        ),
        t if t.starts_with('/') => (
            Treatment::Kept,
            format!(
                "{}: restored as it is (CRIU refuses a file whose size changed)",
                access_text(d)
            ),
        ),
        _ => (
            Treatment::Kept,
            "kernel state CRIU restores as the application had it".to_string(),
        ),
    }
}

/// Warns (tracing, in one line, once per image in this process: a search
/// restores an image thousands of times) about each substitution that
/// [`Treatment::warns`].
pub fn warn_once(image: &Path, subs: &[Substitution]) {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static WARNED: Mutex<Option<HashSet<std::path::PathBuf>>> = Mutex::new(None);
    let said: Vec<String> = subs
        .iter()
        .filter(|s| s.treatment.warns())
        .map(|s| format!("{}: {}", s.what(), s.says))
        .collect();
    if said.is_empty() {
        return;
    }
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned
        .get_or_insert_with(HashSet::new)
        .insert(image.to_path_buf())
    {
        tracing::warn!(
            "image {}: restored copies see files other than the application did: {} (`tdg checkpoint info {}` lists every file)",
            image.display(),
            said.join("; "),
            image.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPTURE: &str = "status=ok\npid=7\nresult_channel=pipe:[1]\n\
fd=0 100000 /dev/null\nfdmode=0 20666\n\
fd=1 1 pipe:[20646]\nfdmode=1 10600\n\
fd=2 102001 /tmp/run.log\nfdpos=2 120\nfdmode=2 100644\n\
fd=3 100002 /tmp/data.bin\nfdpos=3 8\nfdmode=3 100644\n\
fd=4 100000 /tmp/in.dat\nfdpos=4 0\nfdmode=4 100644\n\
fd=5 100001 /dev/ttyS0\nfdmode=5 20660\n\
fd=6 2 /dev/pts/3\nfdmode=6 20620\ntty=6 8803:18\n\
fd=7 100001 /dev/shm/out.bin\nfdpos=7 4096\nfdmode=7 100600\n\
seed=0 /tmp/data.bin\nmap=/tmp/table.bin\nseed_skipped=/tmp/table.bin\n";

    #[test]
    fn every_descriptor_is_said_and_the_three_that_change_what_a_region_sees_warn() {
        let info = CaptureInfo::parse(CAPTURE).unwrap();
        let subs = substitutions(&info);
        let by = |target: &str| {
            subs.iter()
                .find(|s| s.target == target)
                .unwrap_or_else(|| panic!("{target} not listed: {subs:?}"))
        };
        assert_eq!(by("/tmp/run.log").treatment, Treatment::PrivateCopy);
        assert_eq!(by("/dev/shm/out.bin").treatment, Treatment::PrivateCopy);
        assert_eq!(by("/tmp/data.bin").treatment, Treatment::ReadWriteReplaced);
        assert!(by("/tmp/data.bin")
            .says
            .contains("at the checkpoint, kept in the image"));
        assert_eq!(by("pipe:[20646]").treatment, Treatment::PipeClosed);
        assert_eq!(by("/dev/pts/3").treatment, Treatment::TerminalReplaced);
        assert_eq!(by("/dev/ttyS0").treatment, Treatment::DeviceKept);
        assert_eq!(by("/dev/null").treatment, Treatment::Kept);
        assert_eq!(by("/tmp/in.dat").treatment, Treatment::Kept);
        let map = by("/tmp/table.bin");
        assert!(map.fds.is_empty() && map.treatment == Treatment::ReadWriteReplaced);
        let warned: Vec<&str> = subs
            .iter()
            .filter(|s| s.treatment.warns())
            .map(|s| s.target.as_str())
            .collect();
        assert_eq!(
            warned,
            [
                "pipe:[20646]",
                "/tmp/data.bin",
                "/dev/ttyS0",
                "/tmp/table.bin"
            ]
        );
    }
}
