//! How tdg deletes, replaces and writes files. tdg runs as root (CRIU needs
//! it), so a wrong path must never cost a user a file:
//!
//! - [`OwnedDir`]: a directory tdg makes carries a marker file
//!   ([`MARKER`]) naming what it holds. tdg empties, replaces or removes
//!   only a directory with that marker (of the same kind), and refuses any
//!   other non-empty directory with one line naming the path and the way
//!   out.
//! - [`write_atomic`], [`copy_atomic`]: the file appears whole or not at
//!   all: a temporary with an unpredictable name, created exclusively with
//!   mode 0600 in the destination's directory, written, synced, then renamed
//!   over the destination. A symbolic link (or a device, a FIFO, a
//!   directory) at the destination is refused, never followed or replaced.
//! - [`scratch_dir`]: a private (0700) directory with an unpredictable name
//!   under `$TMPDIR`, removed when dropped.
//!
//! Every refusal is an `io::Error` whose message is the whole line (path,
//! cause, way out); [`is_refusal`] tells it from an I/O failure.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file that makes a directory tdg's own.
pub const MARKER: &str = ".tdg-owned";

/// A marker is a few lines; anything longer is not one tdg wrote.
const MARKER_MAX_BYTES: u64 = 4096;

/// What a tdg-owned directory is for, as the messages name it: `what` is
/// recorded in the marker, so a directory holding one kind (a tuning
/// campaign) is never emptied to make another (a checkpoint image);
/// `option` is the flag that chooses the path, the way out of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purpose {
    pub what: &'static str,
    pub option: &'static str,
}

/// Why tdg will not touch a path; its `Display` is the whole message.
#[derive(Debug)]
pub struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn refused(message: String) -> io::Error {
    io::Error::other(Refused(message))
}

/// Whether `e` is one of this crate's refusals (a path tdg will not touch)
/// rather than a failed system call.
pub fn is_refusal(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Refused>())
}

/// An I/O failure with the path and what was being done, for one-line
/// messages; refusals pass through unchanged (they already name the path).
fn annotate<'a>(what: &str, path: &'a Path) -> impl FnOnce(io::Error) -> io::Error + 'a {
    let what = what.to_string();
    move |e| {
        if is_refusal(&e) {
            e
        } else {
            io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
        }
    }
}

/// A directory tdg created (or found empty) and marked as its own.
#[derive(Debug, Clone)]
pub struct OwnedDir {
    path: PathBuf,
    purpose: Purpose,
}

/// What is at a path tdg was asked to use as its directory.
enum Found {
    Missing,
    Empty,
    Owned,
}

impl OwnedDir {
    /// `path` as a directory tdg owns for `purpose`, its contents kept:
    /// created with its parents and marked when missing, marked when empty,
    /// used as it is when it carries `purpose`'s marker. A symbolic link, a
    /// file, a directory of another kind or one tdg did not create is
    /// refused with one line.
    pub fn open(path: &Path, purpose: Purpose) -> io::Result<OwnedDir> {
        match inspect(path, purpose)? {
            Found::Owned => {}
            Found::Empty => mark(path, purpose)?,
            Found::Missing => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent).map_err(annotate("create", parent))?;
                }
                match std::fs::create_dir(path) {
                    Ok(()) => mark(path, purpose)?,
                    // Made by someone else meanwhile: judge it as found.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return OwnedDir::open(path, purpose)
                    }
                    Err(e) => return Err(annotate("create", path)(e)),
                }
            }
        }
        let path = path.canonicalize().map_err(annotate("resolve", path))?;
        Ok(OwnedDir { path, purpose })
    }

    /// [`open`](Self::open), then emptied: a fresh directory for output
    /// that replaces what an earlier run of the same purpose left there.
    pub fn fresh(path: &Path, purpose: Purpose) -> io::Result<OwnedDir> {
        let dir = OwnedDir::open(path, purpose)?;
        dir.clear()?;
        Ok(dir)
    }

    /// The directory (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes everything in the directory but its marker. The directory
    /// is opened without following a link and its marker checked again
    /// through that descriptor, so a directory swapped in meanwhile is
    /// not emptied.
    pub fn clear(&self) -> io::Result<()> {
        let dir = PinnedDir::open(&self.path, self.purpose)?;
        let base = dir.base();
        for entry in std::fs::read_dir(&base).map_err(annotate("list", &self.path))? {
            let entry = entry.map_err(annotate("list", &self.path))?;
            if entry.file_name() == MARKER {
                continue;
            }
            let p = base.join(entry.file_name());
            // `file_type` does not follow links: a link is removed, not
            // what it points to (and std's remove_dir_all never follows).
            let r = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
                _ => std::fs::remove_file(&p),
            };
            r.map_err(annotate("remove", &self.path.join(entry.file_name())))?;
        }
        Ok(())
    }

    /// Removes the directory and everything in it.
    pub fn remove(self) -> io::Result<()> {
        self.clear()?;
        std::fs::remove_file(self.path.join(MARKER)).map_err(annotate("remove", &self.path))?;
        std::fs::remove_dir(&self.path).map_err(annotate("remove", &self.path))
    }
}

/// Removes `path` if it is a directory tdg owns for `purpose`; a missing
/// path is not an error, anything else is refused like [`OwnedDir::open`].
pub fn remove_owned_dir(path: &Path, purpose: Purpose) -> io::Result<()> {
    match inspect(path, purpose)? {
        Found::Missing => Ok(()),
        Found::Empty => std::fs::remove_dir(path).map_err(annotate("remove", path)),
        Found::Owned => OwnedDir {
            path: path.to_path_buf(),
            purpose,
        }
        .remove(),
    }
}

/// Whether `path` is a directory carrying `purpose`'s marker.
pub fn is_owned(path: &Path, purpose: Purpose) -> bool {
    matches!(inspect(path, purpose), Ok(Found::Owned))
}

fn inspect(path: &Path, purpose: Purpose) -> io::Result<Found> {
    let Purpose { what, option } = purpose;
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(annotate("inspect", path)(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(refused(format!(
            "{shown} is a symbolic link; tdg does not write through links: choose another {option}, or put a directory there"
        )));
    }
    if !meta.is_dir() {
        return Err(refused(format!(
            "{shown} exists and is not a directory; choose another {option}"
        )));
    }
    match read_marker(path) {
        Ok(Some(kind)) if kind == what => return Ok(Found::Owned),
        Ok(Some(kind)) => {
            return Err(refused(format!(
                "{shown} holds a tdg {kind}, not a {what}; choose another {option}, or remove {shown} yourself"
            )))
        }
        Ok(None) => {}
        Err(e) => return Err(annotate("read the marker of", path)(e)),
    }
    let mut entries = std::fs::read_dir(path).map_err(annotate("list", path))?;
    if entries.next().is_none() {
        return Ok(Found::Empty);
    }
    Err(refused(format!(
        "{shown} is not empty and tdg did not create it (it has no {MARKER} file); tdg empties or writes into only directories it made: choose another {option}, or empty or remove {shown} yourself"
    )))
}

/// Refuses a directory that someone other than this user could change:
/// one owned by another user, or writable by its group or by others. tdg
/// runs as root what some directories hold (a checkpoint image is restored
/// and run), so such a directory is trusted only when it is this user's
/// alone. A link is refused as well. The refusal is one line naming the
/// path, why, and the way out.
pub fn refuse_shared(path: &Path, purpose: Purpose) -> io::Result<()> {
    let shown = path.display();
    let meta = std::fs::symlink_metadata(path).map_err(annotate("inspect", path))?;
    if meta.file_type().is_symlink() {
        return Err(refused(format!(
            "{shown} is a symbolic link; tdg does not use a {} through a link: give the directory itself",
            purpose.what
        )));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(refused(format!(
            "{shown} belongs to uid {}, not to this user (uid {me}), who would run what it holds; \
             if you trust its contents, `chown -R {me} {shown}`; otherwise choose another {}",
            meta.uid(),
            purpose.option
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refused(format!(
            "{shown} is writable by {} (mode {:o}), who could change what tdg runs from it as this user; \
             if you trust its contents, `chmod go-w {shown}`; otherwise choose another {}",
            match meta.mode() & 0o022 {
                0o020 => "its group",
                0o002 => "other users",
                _ => "its group and other users",
            },
            meta.mode() & 0o7777,
            purpose.option
        )));
    }
    Ok(())
}

/// A directory built beside its destination and swapped in whole when it
/// is complete ([`install`](Self::install)): what was at the destination
/// (an earlier directory of the same purpose, or an empty one) stays
/// intact until the new one exists, so a run that fails (a typo in the
/// command being captured) costs nothing. The staged directory has an
/// unpredictable name in the destination's parent (so the swap is a
/// rename), mode 0700 and tdg's marker; dropped without being installed,
/// it is removed.
#[derive(Debug)]
pub struct Staged {
    path: Option<PathBuf>,
    dest: PathBuf,
    purpose: Purpose,
}

impl Staged {
    /// Checks `dest` as [`OwnedDir::open`] would (a link, a file, a
    /// directory of another kind or one tdg did not make is refused; an
    /// existing one must also pass [`refuse_shared`]) and stages a new
    /// directory beside it.
    pub fn beside(dest: &Path, purpose: Purpose) -> io::Result<Staged> {
        if !matches!(inspect(dest, purpose)?, Found::Missing) {
            refuse_shared(dest, purpose)?;
        }
        let name = dest.file_name().ok_or_else(|| {
            refused(format!(
                "{} names no directory; choose another {}",
                dest.display(),
                purpose.option
            ))
        })?;
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(parent).map_err(annotate("create", parent))?;
        let staged = tempfile::Builder::new()
            .prefix(&format!(".{}.tdg-new-", name.to_string_lossy()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)
            .map_err(annotate("create a directory in", parent))?
            .keep();
        let staged = Staged {
            path: Some(staged),
            dest: dest.to_path_buf(),
            purpose,
        };
        mark(staged.path(), purpose)?;
        Ok(staged)
    }

    /// The staged directory (absolute when the destination was).
    pub fn path(&self) -> &Path {
        self.path
            .as_deref()
            .expect("present until installed or dropped")
    }

    /// Puts the staged directory at the destination: renamed there when
    /// nothing is, exchanged with what is (judged again now, as
    /// [`beside`](Self::beside) judged it), which is then removed. Returns
    /// the destination, canonical.
    pub fn install(mut self) -> io::Result<PathBuf> {
        let staged = self
            .path
            .clone()
            .expect("present until installed or dropped");
        let dest = self.dest.clone();
        let found = inspect(&dest, self.purpose)?;
        if !matches!(found, Found::Missing) {
            refuse_shared(&dest, self.purpose)?;
        }
        match found {
            Found::Missing => match std::fs::rename(&staged, &dest) {
                Ok(()) => {}
                // Made by someone else meanwhile: judge it as found.
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EEXIST) | Some(libc::ENOTEMPTY)) =>
                {
                    return self.install()
                }
                Err(e) => return Err(annotate("rename into", &dest)(e)),
            },
            Found::Empty | Found::Owned => {
                exchange(&staged, &dest)?;
                // The old directory is at the staged name now.
                let old = staged.clone();
                self.path = None;
                match found {
                    Found::Empty => std::fs::remove_dir(&old).map_err(annotate("remove", &old))?,
                    _ => remove_owned_dir(&old, self.purpose)?,
                }
                return dest.canonicalize().map_err(annotate("resolve", &dest));
            }
        }
        self.path = None;
        dest.canonicalize().map_err(annotate("resolve", &dest))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = remove_owned_dir(&p, self.purpose);
        }
    }
}

/// Swaps two directories' names atomically (`renameat2` with
/// `RENAME_EXCHANGE`); where the filesystem cannot, the destination is
/// renamed aside first, so it is never gone without the other in its place
/// for longer than two renames.
fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
    };
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: two valid NUL-terminated paths.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) {
        return Err(annotate("swap in", b)(e));
    }
    let aside = a.with_extension("tdg-old");
    std::fs::rename(b, &aside).map_err(annotate("move aside", b))?;
    if let Err(e) = std::fs::rename(a, b) {
        let _ = std::fs::rename(&aside, b);
        return Err(annotate("rename into", b)(e));
    }
    std::fs::rename(&aside, a).map_err(annotate("move", &aside))
}

/// The kind recorded in `dir`'s marker; `None` when there is no marker or
/// it is not one tdg wrote (a link, not a regular file, too long, no
/// `kind=` line).
fn read_marker(dir: &Path) -> io::Result<Option<String>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(MARKER))
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > MARKER_MAX_BYTES {
        return Ok(None);
    }
    let mut text = String::new();
    if file
        .take(MARKER_MAX_BYTES)
        .read_to_string(&mut text)
        .is_err()
    {
        return Ok(None);
    }
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("kind="))
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty()))
}

fn mark(dir: &Path, purpose: Purpose) -> io::Result<()> {
    let text = format!(
        "tdg created this directory for a {what} and may empty or replace it.\n\
         Delete this file to keep tdg from touching the directory.\n\
         kind={what}\n",
        what = purpose.what
    );
    write_atomic(&dir.join(MARKER), text.as_bytes())
}

/// A directory held open by descriptor after its marker was checked
/// through it; paths under [`base`](Self::base) resolve through that
/// descriptor, so swapping the directory for a link after the check does
/// not redirect what is removed.
struct PinnedDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PinnedDir {
    fn open(path: &Path, purpose: Purpose) -> io::Result<PinnedDir> {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
        // SAFETY: `c` is a valid NUL-terminated path; the flags ask for a
        // directory and refuse a link in the last component.
        let raw = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
                return Err(refused(format!(
                    "{} is no longer a directory tdg created (a link or a file is there now); choose another {}",
                    path.display(),
                    purpose.option
                )));
            }
            return Err(annotate("open", path)(e));
        }
        // SAFETY: `open` returned a fresh descriptor we now own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let pinned = PinnedDir {
            fd,
            path: path.to_path_buf(),
        };
        if read_marker(&pinned.base())?.as_deref() != Some(purpose.what) {
            return Err(refused(format!(
                "{} no longer carries tdg's {MARKER} for a {}; it was not emptied: choose another {}",
                path.display(),
                purpose.what,
                purpose.option
            )));
        }
        Ok(pinned)
    }

    /// `/proc/self/fd/N`: the open directory itself; its path when /proc
    /// is not mounted.
    fn base(&self) -> PathBuf {
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()));
        if proc_path.is_dir() {
            proc_path
        } else {
            self.path.clone()
        }
    }
}

/// Writes `bytes` to `path` atomically (see the crate documentation). A
/// file replaced keeps its permissions and, when tdg runs as root, its
/// owner; a new file gets `0666` less the umask, as `creat` would.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, None, |f| f.write_all(bytes))
}

/// [`write_atomic`] with the file's permission bits given (0o600 for a
/// file only its owner may read).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, Some(mode), |f| f.write_all(bytes))
}

/// Copies `from` to `to` atomically, with `from`'s permission bits (an
/// executable stays executable).
pub fn copy_atomic(from: &Path, to: &Path) -> io::Result<()> {
    let mut src = File::open(from).map_err(annotate("read", from))?;
    let mode = src.metadata().map_err(annotate("read", from))?.mode() & 0o7777;
    replace(to, Some(mode), |f| io::copy(&mut src, f).map(|_| ()))
        .map_err(annotate("copy into", to))
}

/// Opens `path` to write a stream into from its start (a log that grows
/// as tdg works, which cannot be written atomically): created, or a
/// regular file truncated. A link or anything but a regular file is
/// refused, never followed or truncated.
pub fn create_file(path: &Path) -> io::Result<File> {
    refuse_non_file(path)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refuse_non_file(path).err().unwrap_or(e)
            } else {
                annotate("create", path)(e)
            }
        })?;
    if !file.metadata().map_err(annotate("create", path))?.is_file() {
        return Err(refused(format!(
            "{} is not a regular file; tdg writes only files: choose another path",
            path.display()
        )));
    }
    Ok(file)
}

/// The metadata of what is at `path` (`None`: nothing), refusing a link or
/// anything but a regular file there.
fn refuse_non_file(path: &Path) -> io::Result<Option<std::fs::Metadata>> {
    let shown = path.display();
    let existing = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(annotate("inspect", path)(e)),
    };
    let t = existing.file_type();
    if t.is_symlink() {
        return Err(refused(format!(
            "{shown} is a symbolic link; tdg does not write through links: remove it or choose another path"
        )));
    }
    if !t.is_file() {
        return Err(refused(format!(
            "{shown} exists and is not a regular file; tdg replaces only files: choose another path"
        )));
    }
    Ok(Some(existing))
}

fn replace(
    path: &Path,
    mode: Option<u32>,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let existing = refuse_non_file(path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".tdg-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(annotate("write", path))?;
    fill(tmp.as_file_mut()).map_err(annotate("write", path))?;
    let mode = mode
        .or_else(|| existing.as_ref().map(|m| m.mode() & 0o7777))
        .unwrap_or(0o666 & !umask());
    let file = tmp.as_file();
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(annotate("write", path))?;
    if let Some(m) = &existing {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::fchown(file, Some(m.uid()), Some(m.gid()))
                .map_err(annotate("write", path))?;
        }
    }
    file.sync_all().map_err(annotate("write", path))?;
    // rename(2) replaces the name itself: a link planted after the check
    // above is replaced, never followed.
    tmp.persist(path)
        .map_err(|e| annotate("write", path)(e.error))?;
    Ok(())
}

/// The process's umask, read without changing it (`umask(2)` can only be
/// read by setting it, which races with other threads creating files).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Keeps a copy of `from` (a log tdg wrote into a directory about to be
/// removed) as a new file with an unpredictable name `PREFIX-XXXXXX.log`
/// under `$TMPDIR`, mode 0600, created exclusively; returns its path.
pub fn keep_copy(from: &Path, prefix: &str) -> io::Result<PathBuf> {
    let mut src = File::open(from).map_err(annotate("read", from))?;
    let mut kept = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        .suffix(".log")
        .tempfile()
        .map_err(annotate("keep a copy of", from))?;
    io::copy(&mut src, kept.as_file_mut()).map_err(annotate("keep a copy of", from))?;
    let (_, path) = kept
        .keep()
        .map_err(|e| annotate("keep a copy of", from)(e.error))?;
    Ok(path)
}

/// A private scratch directory (mode 0700, unpredictable name
/// `PREFIX-XXXXXX` under `$TMPDIR`) for generated sources and builds,
/// removed when dropped; kept (and named on stderr) when `TDG_KEEP_TMP` is
/// set, for debugging.
pub fn scratch_dir(prefix: &str) -> io::Result<ScratchDir> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}-"))
        // tempfile's directories get the umask's mode otherwise.
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create a scratch directory in {}: {e}; set TMPDIR to a writable directory",
                    std::env::temp_dir().display()
                ),
            )
        })?;
    Ok(ScratchDir {
        dir: Some(dir),
        keep: std::env::var_os("TDG_KEEP_TMP").is_some(),
    })
}

#[derive(Debug)]
pub struct ScratchDir {
    dir: Option<tempfile::TempDir>,
    keep: bool,
}

impl ScratchDir {
    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until dropped").path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            if self.keep {
                eprintln!("tdg: kept {}", dir.keep().display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::entry_names;

    const IMAGE: Purpose = Purpose {
        what: "checkpoint image",
        option: "-o",
    };
    const CAMPAIGN: Purpose = Purpose {
        what: "tuning campaign",
        option: "--campaign",
    };

    #[test]
    fn a_users_directory_is_refused_and_left_whole() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("out");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("dump.log"), "mine").unwrap();
        std::fs::write(d.join("thesis.tex"), "years of work").unwrap();
        let e = OwnedDir::fresh(&d, IMAGE).unwrap_err();
        assert!(is_refusal(&e));
        let msg = e.to_string();
        assert!(
            msg.contains(&d.display().to_string()) && msg.contains("choose another -o"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
        assert_eq!(entry_names(&d), ["dump.log", "thesis.tex"]);
    }

    #[test]
    fn a_directory_tdg_made_is_emptied_but_keeps_its_marker() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b/img");
        let owned = OwnedDir::open(&d, IMAGE).unwrap();
        std::fs::write(owned.path().join("core.img"), "x").unwrap();
        std::fs::create_dir(owned.path().join("preload")).unwrap();
        std::fs::write(owned.path().join("preload/shim.so"), "x").unwrap();
        let again = OwnedDir::fresh(&d, IMAGE).unwrap();
        assert_eq!(entry_names(again.path()), [MARKER]);
        // An empty directory is adopted.
        let e = t.path().join("empty");
        std::fs::create_dir(&e).unwrap();
        OwnedDir::fresh(&e, IMAGE).unwrap();
        assert_eq!(entry_names(&e), [MARKER]);
    }

    #[test]
    fn a_directory_of_another_kind_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("c");
        let c = OwnedDir::open(&d, CAMPAIGN).unwrap();
        std::fs::write(c.path().join("results.json"), "{}").unwrap();
        let e = OwnedDir::fresh(&d, IMAGE).unwrap_err();
        assert!(e.to_string().contains("holds a tdg tuning campaign"), "{e}");
        assert!(c.path().join("results.json").exists());
    }

    #[test]
    fn links_are_refused_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        // Even a victim that looks like tdg's own is not reached by a link.
        OwnedDir::open(&victim, IMAGE).unwrap();
        std::fs::write(victim.join("precious"), "x").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = OwnedDir::fresh(&link, IMAGE).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(victim.join("precious").exists());

        let target = t.path().join("target.txt");
        std::fs::write(&target, "keep").unwrap();
        let flink = t.path().join("out.json");
        std::os::unix::fs::symlink(&target, &flink).unwrap();
        let e = write_atomic(&flink, b"new").unwrap_err();
        assert!(
            is_refusal(&e) && e.to_string().contains("symbolic link"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

        // A planted marker that is a link does not make a directory tdg's.
        let planted = t.path().join("planted");
        std::fs::create_dir(&planted).unwrap();
        std::fs::write(planted.join("data"), "x").unwrap();
        std::os::unix::fs::symlink(victim.join(MARKER), planted.join(MARKER)).unwrap();
        assert!(OwnedDir::fresh(&planted, IMAGE).is_err());
        assert!(planted.join("data").exists());
    }

    #[test]
    fn a_damaged_marker_is_no_marker() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join(MARKER), vec![0xffu8; 10_000]).unwrap();
        std::fs::write(d.join("data"), "x").unwrap();
        assert!(is_refusal(&OwnedDir::fresh(&d, IMAGE).unwrap_err()));
        assert!(d.join("data").exists());
    }

    #[test]
    fn remove_owned_dir_removes_only_tdgs() {
        let t = tempfile::tempdir().unwrap();
        let mine = OwnedDir::open(&t.path().join("trial"), IMAGE).unwrap();
        std::fs::write(mine.path().join("x.img"), "x").unwrap();
        let p = mine.path().to_path_buf();
        remove_owned_dir(&p, IMAGE).unwrap();
        assert!(!p.exists());
        remove_owned_dir(&p, IMAGE).unwrap();
        let users = t.path().join("users");
        std::fs::create_dir(&users).unwrap();
        std::fs::write(users.join("f"), "x").unwrap();
        assert!(remove_owned_dir(&users, IMAGE).is_err());
        assert!(users.join("f").exists());
    }

    #[test]
    fn atomic_write_keeps_mode_and_leaves_no_temporary() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        assert_eq!(entry_names(t.path()), ["r.json"]);
        write_atomic_mode(&t.path().join("private"), b"x", 0o600).unwrap();
        let m = std::fs::metadata(t.path().join("private")).unwrap().mode();
        assert_eq!(m & 0o777, 0o600);
        let e = write_atomic(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = write_atomic(Path::new("/nonexistent-dir/x.json"), b"x").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/x.json"), "{e}");
    }

    #[test]
    fn a_stream_is_never_opened_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("passwd");
        std::fs::write(&target, "root:x:0:0").unwrap();
        let log = t.path().join("tune.jsonl");
        std::os::unix::fs::symlink(&target, &log).unwrap();
        let e = create_file(&log).unwrap_err();
        assert!(
            is_refusal(&e) && e.to_string().contains("symbolic link"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "root:x:0:0");
        let fresh = t.path().join("new.jsonl");
        writeln!(create_file(&fresh).unwrap(), "line").unwrap();
        writeln!(create_file(&fresh).unwrap(), "again").unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "again\n");
    }

    #[test]
    fn copies_keep_the_executable_bit() {
        let t = tempfile::tempdir().unwrap();
        let from = t.path().join("exe");
        std::fs::write(&from, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&from, std::fs::Permissions::from_mode(0o755)).unwrap();
        copy_atomic(&from, &t.path().join("copy")).unwrap();
        let m = std::fs::metadata(t.path().join("copy")).unwrap().mode();
        assert_eq!(m & 0o777, 0o755);
    }

    #[test]
    fn a_staged_directory_replaces_its_destination_only_when_installed() {
        let t = tempfile::tempdir().unwrap();
        let dest = t.path().join("img");
        // Nothing there: the staged directory is renamed into place.
        let s = Staged::beside(&dest, IMAGE).unwrap();
        std::fs::write(s.path().join("core.img"), "first").unwrap();
        let staged_name = s.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(staged_name.starts_with(".img.tdg-new-"), "{staged_name}");
        let m = std::fs::metadata(s.path()).unwrap().mode() & 0o777;
        assert_eq!(m, 0o700);
        s.install().unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("core.img")).unwrap(),
            "first"
        );
        assert!(is_owned(&dest, IMAGE));
        // A second one dropped before installing leaves the first whole and
        // nothing beside it.
        let s = Staged::beside(&dest, IMAGE).unwrap();
        std::fs::write(s.path().join("core.img"), "second").unwrap();
        drop(s);
        assert_eq!(
            std::fs::read_to_string(dest.join("core.img")).unwrap(),
            "first"
        );
        assert_eq!(entry_names(t.path()), ["img"]);
        // Installed, it replaces the first whole: no file of the old one stays.
        std::fs::write(dest.join("old-only.img"), "x").unwrap();
        let s = Staged::beside(&dest, IMAGE).unwrap();
        std::fs::write(s.path().join("core.img"), "third").unwrap();
        s.install().unwrap();
        assert_eq!(entry_names(&dest), [MARKER, "core.img"]);
        assert_eq!(
            std::fs::read_to_string(dest.join("core.img")).unwrap(),
            "third"
        );
        assert_eq!(entry_names(t.path()), ["img"]);
    }

    #[test]
    fn a_staged_directory_refuses_what_open_refuses_and_a_shared_one() {
        let t = tempfile::tempdir().unwrap();
        let users = t.path().join("users");
        std::fs::create_dir(&users).unwrap();
        std::fs::write(users.join("thesis.tex"), "x").unwrap();
        assert!(is_refusal(&Staged::beside(&users, IMAGE).unwrap_err()));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&users, &link).unwrap();
        assert!(is_refusal(&Staged::beside(&link, IMAGE).unwrap_err()));
        // An earlier image that its group may write is not adopted.
        let shared = t.path().join("shared");
        OwnedDir::open(&shared, IMAGE).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = Staged::beside(&shared, IMAGE).unwrap_err();
        assert!(
            is_refusal(&e)
                && e.to_string().contains("writable by its group")
                && e.to_string().contains("chmod go-w"),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'));
        assert_eq!(entry_names(t.path()), ["link", "shared", "users"]);
        // Another user's, as root can make it.
        if unsafe { libc::geteuid() } == 0 {
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&shared, Some(4242), None).unwrap();
            let e = refuse_shared(&shared, IMAGE).unwrap_err();
            assert!(e.to_string().contains("belongs to uid 4242"), "{e}");
        } else {
            eprintln!("skipped: the foreign-owner case needs root to chown");
        }
    }

    #[test]
    fn a_kept_copy_is_a_new_private_file() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("dump.log");
        std::fs::write(&log, "Error (criu/x.c:1): boom\n").unwrap();
        let kept = keep_copy(&log, "tdg-test-dump").unwrap();
        assert_eq!(
            std::fs::read_to_string(&kept).unwrap(),
            "Error (criu/x.c:1): boom\n"
        );
        assert_eq!(std::fs::metadata(&kept).unwrap().mode() & 0o777, 0o600);
        std::fs::remove_file(kept).unwrap();
    }

    #[test]
    fn scratch_directories_are_private_and_unpredictable() {
        let a = scratch_dir("tdg-test").unwrap();
        let b = scratch_dir("tdg-test").unwrap();
        let mode = std::fs::metadata(a.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("tdg-test-"), "{name}");
        assert!(
            !name.contains(&format!("-{}-", std::process::id())),
            "the name holds the pid: {name}"
        );
        assert_ne!(a.path(), b.path());
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}
