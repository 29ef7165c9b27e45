//! `tdg doctor`: can this machine checkpoint, time and profile? Each finding
//! says what is missing and how to fix it.

use crate::criu::{find_criu, running_as_root};
use std::path::Path;
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    pub area: &'static str,
    pub status: Status,
    pub what: String,
    pub fix: Option<String>,
}

fn finding(
    area: &'static str,
    status: Status,
    what: impl Into<String>,
    fix: Option<&str>,
) -> Finding {
    Finding {
        area,
        status,
        what: what.into(),
        fix: fix.map(String::from),
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct DoctorReport {
    pub findings: Vec<Finding>,
    /// No `Fail` among the checkpoint findings.
    pub can_checkpoint: bool,
}

impl DoctorReport {
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        for f in &self.findings {
            let tag = match f.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            s += &format!("{tag}  [{}] {}\n", f.area, f.what);
            if let Some(fix) = &f.fix {
                s += &format!("      fix: {fix}\n");
            }
        }
        s += if self.can_checkpoint {
            "checkpointing: ready\n"
        } else {
            "checkpointing: NOT ready (see FAIL lines)\n"
        };
        s
    }
}

pub fn run_doctor() -> DoctorReport {
    let mut f = Vec::new();
    let root = running_as_root();
    if root {
        // Before `criu check`, so its kernel probe lands in the cache.
        let _ = crate::criu::prepare_kdat_cache_dir();
    }
    f.push(root_check(root));
    f.extend(criu_checks(root));
    f.push(pid_namespace_check(root));
    if root {
        f.push(kdat_cache_check());
    }
    f.push(kernel_check());
    f.push(compiler_check());
    f.push(tsc_check());
    f.push(perf_counter_check());
    let can_checkpoint = !f
        .iter()
        .any(|x| x.area == "checkpoint" && x.status == Status::Fail);
    DoctorReport {
        findings: f,
        can_checkpoint,
    }
}

fn root_check(root: bool) -> Finding {
    if root {
        finding("checkpoint", Status::Ok, "running as root", None)
    } else {
        finding(
            "checkpoint",
            Status::Fail,
            "not root: CRIU needs CAP_SYS_ADMIN and CAP_SYS_PTRACE",
            Some("run tdg as root or with sudo"),
        )
    }
}

/// CRIU and libcriu found; as root, both working (`criu check`, the RPC).
fn criu_checks(root: bool) -> Vec<Finding> {
    let criu = match find_criu() {
        Ok(criu) => criu,
        Err(e) => {
            return vec![finding(
                "checkpoint",
                Status::Fail,
                e.to_string(),
                Some("scripts/setup builds CRIU >= 4.1 from Debian's source into .deps/bin (about a minute); put that directory on PATH, or set TDG_CRIU=/path/to/criu"),
            )];
        }
    };
    let mut f = vec![finding(
        "checkpoint",
        Status::Ok,
        format!("criu {} at {}", criu.version, criu.path.display()),
        None,
    )];
    f.push(match &criu.libcriu {
        Some(l) => finding(
            "checkpoint",
            Status::Ok,
            format!("libcriu at {}", l.display()),
            None,
        ),
        None => finding(
            "checkpoint",
            Status::Fail,
            "libcriu not found next to criu (the host library loads it for the self-dump)",
            Some("run scripts/setup, or set TDG_LIBCRIU=/path/to/libcriu.so"),
        ),
    });
    if root {
        f.push(criu_check(&criu.path));
        if let Some(lib) = &criu.libcriu {
            f.push(libcriu_rpc_check(lib, &criu.path));
        }
    }
    f
}

fn compiler_check() -> Finding {
    match toolchain::CCompiler::find(None) {
        Ok(cc) => finding(
            "timing",
            Status::Ok,
            format!("C compiler: {}", cc.version),
            None,
        ),
        Err(e) => finding(
            "timing",
            Status::Fail,
            e.to_string(),
            Some("apt-get install gcc"),
        ),
    }
}

/// The application's self-dump goes through libcriu's RPC to this criu:
/// ask it for criu's version the same way.
fn libcriu_rpc_check(lib: &Path, criu: &Path) -> Finding {
    match crate::libcriu::version_through_libcriu(lib, criu) {
        Ok(v) => finding(
            "checkpoint",
            Status::Ok,
            format!("libcriu reaches criu {v} through its RPC service (the self-dump's path)"),
            None,
        ),
        Err(e) => finding(
            "checkpoint",
            Status::Fail,
            format!("libcriu cannot drive {}: {e}", criu.display()),
            Some("rebuild CRIU and libcriu together with scripts/setup, or set TDG_LIBCRIU to the libcriu of this criu"),
        ),
    }
}

fn criu_check(criu: &Path) -> Finding {
    match Command::new(criu)
        .arg("check")
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string();
            if out.status.success() {
                finding(
                    "checkpoint",
                    Status::Ok,
                    format!("criu check: {last}"),
                    None,
                )
            } else {
                let first_err = text
                    .lines()
                    .find(|l| l.contains("Error") || l.contains("fail"))
                    .unwrap_or(&last)
                    .trim()
                    .to_string();
                finding(
                    "checkpoint",
                    Status::Fail,
                    format!("criu check failed: {first_err}"),
                    Some("the kernel lacks a feature CRIU needs (see `criu check --all`); use a kernel with CONFIG_CHECKPOINT_RESTORE"),
                )
            }
        }
        Err(e) => finding(
            "checkpoint",
            Status::Fail,
            format!("cannot run {}: {e}", criu.display()),
            None,
        ),
    }
}

fn pid_namespace_check(root: bool) -> Finding {
    let (Ok(unshare), Ok(setsid)) = (
        crate::restore::find_util_linux("unshare"),
        crate::restore::find_util_linux("setsid"),
    ) else {
        return finding(
            "checkpoint",
            Status::Fail,
            "unshare or setsid (util-linux) not found; every restore runs in a fresh PID namespace and session through them",
            Some("apt-get install util-linux"),
        );
    };
    if !root {
        return finding(
            "checkpoint",
            Status::Warn,
            "PID namespaces not tested (needs root)",
            None,
        );
    }
    let ok = Command::new(unshare)
        .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
        .arg(setsid)
        .args(["--wait", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        finding(
            "checkpoint",
            Status::Ok,
            "fresh PID namespaces work (restored copies cannot collide on PIDs)",
            None,
        )
    } else {
        finding(
            "checkpoint",
            Status::Fail,
            "cannot create a PID namespace (unshare --pid failed)",
            Some("run on the host or in a privileged container; check user.max_pid_namespaces"),
        )
    }
}

fn kdat_cache_check() -> Finding {
    let cached = Path::new(crate::criu::KDAT_CACHE_DIR)
        .join("criu.kdat")
        .exists()
        || (fs_is_tmpfs("/run") && Path::new("/run/criu.kdat").exists());
    if cached {
        finding(
            "checkpoint",
            Status::Ok,
            "CRIU's kernel probe is cached on tmpfs (saves ~40 ms per dump/restore)",
            None,
        )
    } else {
        finding(
            "checkpoint",
            Status::Warn,
            "CRIU's kernel probe is not cached on tmpfs, so every dump and restore re-probes the kernel (~40 ms each)",
            Some("rebuild CRIU with scripts/setup (it sets RUNDIR=/dev/shm/tdg-criu), or mount tmpfs on /run"),
        )
    }
}

fn kernel_check() -> Finding {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let has_last_pid = Path::new("/proc/sys/kernel/ns_last_pid").exists();
    if has_last_pid {
        finding(
            "checkpoint",
            Status::Ok,
            format!("kernel {} with checkpoint/restore support", release.trim()),
            None,
        )
    } else {
        finding(
            "checkpoint",
            Status::Fail,
            format!(
                "kernel {} lacks /proc/sys/kernel/ns_last_pid (no CONFIG_CHECKPOINT_RESTORE)",
                release.trim()
            ),
            Some("boot a kernel built with CONFIG_CHECKPOINT_RESTORE=y"),
        )
    }
}

fn fs_is_tmpfs(path: &str) -> bool {
    let c = std::ffi::CString::new(path).expect("no NUL");
    // SAFETY: statfs fills the zeroed struct; c is a valid C string.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type == libc::TMPFS_MAGIC
    }
}

/// The timing header's own verdict on the cycle counter, from a program
/// built with it (the host library and the drivers decide the same way).
fn tsc_check() -> Finding {
    let verdict = toolchain::CCompiler::find(None).and_then(|cc| c_timing::tsc_verdict(&cc));
    match verdict {
        Ok(c_timing::TscVerdict::Usable) => finding(
            "timing",
            Status::Ok,
            "invariant TSC with rdtscp: cycle timers are trustworthy",
            None,
        ),
        Ok(c_timing::TscVerdict::Unusable(why)) => finding(
            "timing",
            Status::Warn,
            format!("{why}: tdg times with CLOCK_MONOTONIC_RAW"),
            None,
        ),
        Err(e) => finding(
            "timing",
            Status::Warn,
            format!("cannot ask tdg_timing.h about the TSC: {e}"),
            Some("check the C compiler finding above"),
        ),
    }
}

/// The counter the check opens: CPU cycles of this thread, user space only
/// (what a non-root tdg may count under `perf_event_paranoid` 2), created
/// disabled. The layout and its bit fields are the kernel's, from
/// `perf-event-open-sys` (generated from the kernel's headers) rather than
/// a hand-counted struct, which once set `sample_type` for the flags word.
fn cycles_attr() -> perf_event_open_sys::bindings::perf_event_attr {
    use perf_event_open_sys::bindings as sys;
    let mut attr = sys::perf_event_attr {
        type_: sys::PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: sys::PERF_COUNT_HW_CPU_CYCLES as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

fn perf_counter_check() -> Finding {
    let mut attr = cycles_attr();
    // SAFETY: a valid attr for this thread (pid 0, any CPU, no group); the
    // descriptor is closed below.
    let fd = unsafe { perf_event_open_sys::perf_event_open(&mut attr, 0, -1, -1, 0) };
    if fd >= 0 {
        // SAFETY: fd was just returned by the kernel.
        unsafe { libc::close(fd) };
        finding(
            "profile",
            Status::Ok,
            "hardware cycle counters available",
            None,
        )
    } else {
        let err = std::io::Error::last_os_error();
        finding(
            "profile",
            Status::Warn,
            format!(
                "no hardware performance counters ({err}); tdg measures wall-clock time instead"
            ),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes the check hands the kernel are those C fills in through
    /// the system's `<linux/perf_event.h>` for the same counter: the flags
    /// word (disabled, exclude_kernel, exclude_hv) where the kernel reads
    /// it, `sample_type` and the rest zero. The first 64 bytes are every
    /// header version's (PERF_ATTR_SIZE_VER0); `size` differs by version.
    #[test]
    fn the_counters_attributes_are_laid_out_as_the_kernel_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("attr.c");
        std::fs::write(
            &src,
            "#include <linux/perf_event.h>\n#include <stdio.h>\n#include <string.h>\n\
             int main(void) {\n\
                 struct perf_event_attr a;\n\
                 memset(&a, 0, sizeof a);\n\
                 a.type = PERF_TYPE_HARDWARE;\n\
                 a.config = PERF_COUNT_HW_CPU_CYCLES;\n\
                 a.disabled = 1;\n\
                 a.exclude_kernel = 1;\n\
                 a.exclude_hv = 1;\n\
                 const unsigned char *b = (const unsigned char *)&a;\n\
                 for (int i = 0; i < PERF_ATTR_SIZE_VER0; i++)\n\
                     printf(\"%02x\", b[i]);\n\
                 return 0;\n\
             }\n",
        )
        .unwrap();
        let exe = dir.path().join("attr");
        toolchain::CCompiler::find(None)
            .unwrap()
            .compile(&toolchain::CompileJob {
                sources: vec![src],
                output: exe.clone(),
                ..Default::default()
            })
            .unwrap();
        let kernel = toolchain::run(&mut std::process::Command::new(&exe), None)
            .unwrap()
            .stdout;
        let mut attr = cycles_attr();
        attr.size = 0;
        // SAFETY: perf_event_attr is plain data at least 64 bytes long.
        let bytes = unsafe { std::slice::from_raw_parts((&attr as *const _) as *const u8, 64) };
        let ours: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(ours, kernel.trim(), "ours, then the kernel header's");
        assert!(
            std::mem::size_of_val(&attr) >= 64,
            "shorter than PERF_ATTR_SIZE_VER0"
        );
    }
}
