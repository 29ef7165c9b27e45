//! Descriptors the captured application inherits from tdg's own parent.
//!
//! CRIU records an open file by the mount it was opened on; one opened in
//! another mount namespace (a container runtime's `/dev/null` on stdin, a
//! descriptor leaked by a CI runner) makes the dump fail with "Can't lookup
//! mount". For the memory devices (`/dev/null`, `/dev/zero`, `/dev/urandom`,
//! ...) a fresh open of the same path in tdg's namespace is the same thing to
//! the application, so capture swaps those; anything else is left alone and,
//! if CRIU refuses it, reported with the descriptor's number and a way out.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// The character-device major of `/dev/null`, `/dev/zero`, `/dev/full`,
/// `/dev/random`, `/dev/urandom` (Documentation/admin-guide/devices.txt).
const MEMORY_DEVICES_MAJOR: u32 = 1;

/// An inherited descriptor to reopen, at the same number, before exec.
#[derive(Debug)]
pub struct Reopen {
    pub fd: i32,
    pub path: CString,
    /// `O_RDONLY`, `O_WRONLY` or `O_RDWR`, as the inherited descriptor had.
    pub access: i32,
}

/// Memory-device descriptors this process would pass on through exec (not
/// close-on-exec) that were opened on a mount outside its mount namespace.
pub fn foreign_memory_devices() -> Vec<Reopen> {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let own_mounts: Vec<&str> = mountinfo
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    fds.into_iter()
        .filter_map(|fd| {
            let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
            let field = |name: &str| {
                fdinfo
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            let flags = i32::from_str_radix(field("flags:")?, 8).ok()?;
            if flags & libc::O_CLOEXEC != 0 || own_mounts.contains(&field("mnt_id:")?) {
                return None;
            }
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
            let meta = std::fs::metadata(&target).ok()?;
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            if !meta.file_type().is_char_device()
                || libc::major(meta.rdev()) != MEMORY_DEVICES_MAJOR
            {
                return None;
            }
            Some(Reopen {
                fd,
                path: CString::new(target.as_os_str().as_bytes()).ok()?,
                access: flags & libc::O_ACCMODE,
            })
        })
        .collect()
}

/// In the forked child: put a fresh open of each path at its descriptor.
/// Only async-signal-safe calls (open, dup2, close).
pub fn reopen_in_child(list: &[Reopen]) -> std::io::Result<()> {
    for r in list {
        // SAFETY: plain syscalls on a valid NUL-terminated path.
        unsafe {
            let fresh = libc::open(r.path.as_ptr(), r.access | libc::O_NOCTTY);
            if fresh < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if fresh != r.fd {
                if libc::dup2(fresh, r.fd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fresh);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor opened in this namespace is never swapped.
    #[test]
    fn own_namespace_null_is_left_alone() {
        let null = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        let fd = null.as_raw_fd();
        // std opens close-on-exec; clear it so the descriptor would be inherited.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        assert!(foreign_memory_devices().iter().all(|r| r.fd != fd));
    }
}
