//! `tdg checkpoint capture`: run the application with the host library armed,
//! let it checkpoint itself, and seal the image with a manifest.

use crate::capture_info::{CaptureInfo, CAPTURE_INFO_FILE, DUMP_LOG_FILE};
use crate::criu::{diagnose_log, running_as_root, Criu};
use crate::env;
use crate::error::{guard_err, io_err, CheckpointError, Result};
use crate::manifest::{checksum_image, sha256_file, Manifest, MANIFEST_FORMAT};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct CaptureRequest {
    /// The application and its arguments.
    pub command: Vec<OsString>,
    pub image: PathBuf,
    /// The region site to act on (None: the first site the application marks).
    pub site: Option<String>,
    /// The timed call of the site, 1-based.
    pub call: u64,
    /// Checkpoint this many calls before the timed one (0 = immediate).
    pub delay: u64,
    /// Kill the application if it runs longer than this.
    pub timeout: Option<Duration>,
    /// Send the application's stdout/stderr to /dev/null (auto-delay, tests).
    pub quiet: bool,
    /// A shim marking the region in an unmodified application (built by
    /// `tdg checkpoint capture --spec`): copied into the image, where the
    /// restored copies find it mapped, and put first in `LD_PRELOAD`.
    pub preload: Option<PathBuf>,
}

pub use crate::manifest::{IMAGE_DIR, PRELOAD_DIR};

#[derive(Debug, Clone)]
pub struct CaptureOutcome {
    pub manifest: Manifest,
    /// The whole run of the application, checkpoint included.
    pub run_time: Duration,
    /// The application's exit status (it keeps running after the dump).
    pub exit_code: Option<i32>,
}

impl CaptureOutcome {
    /// What was captured into `image`, for people: one line, and a warning
    /// when the application failed after the checkpoint.
    pub fn render_text(&self, image: &Path) -> String {
        let m = &self.manifest;
        let mut text = format!(
            "tdg: captured {} (region {}, call {}, delay {}; {}; whole run {})\n",
            image.display(),
            m.site.as_deref().unwrap_or("-"),
            m.call.map_or("-".into(), |c| c.to_string()),
            m.delay.map_or("-".into(), |d| d.to_string()),
            stats::bytes(m.image_bytes()),
            stats::ns(self.run_time.as_secs_f64() * 1e9)
        );
        if let Some(code) = self.exit_code.filter(|&c| c != 0) {
            text.push_str(&format!(
                "tdg: warning: the application exited with status {code} after the checkpoint\n"
            ));
        }
        text
    }

    /// The same as a JSON value.
    pub fn document(&self, image: &Path) -> serde_json::Value {
        serde_json::json!({
            "image": image.display().to_string(),
            "manifest": self.manifest,
            "image_bytes": self.manifest.image_bytes(),
            "run_ns": self.run_time.as_secs_f64() * 1e9,
            "exit_code": self.exit_code,
        })
    }
}

pub fn validate_call_and_delay(call: u64, delay: u64) -> Result<()> {
    if call == 0 {
        return Err(CheckpointError::InvalidRequest(
            "--call counts from 1 (the first call of the region is call 1)".into(),
        ));
    }
    if delay >= call {
        return Err(CheckpointError::InvalidRequest(format!(
            "--delay {delay} needs --call > {delay}: the checkpoint is taken {delay} calls before the timed call {call}"
        )));
    }
    Ok(())
}

/// A capture in progress: the image is written into a directory staged
/// beside the requested one and swapped in only once it is complete
/// ([`StagedImage::install`]), so a capture that fails (a typo in the
/// command, the application ending before the call) leaves the previous
/// image as it was. The staged directory is private (0700, an unpredictable
/// name, tdg's marker); dropped without being installed, it is removed.
/// CRIU records the directory the image was written in, which a restore
/// hands it back wherever the image is now (`RestorePlan`).
pub struct StagedImage(fsguard::Staged);

impl StagedImage {
    /// Stages a new image for `image`, which must be missing, an empty
    /// directory or an earlier image (owned by this user, writable by no one
    /// else); anything else (a user's directory, even one holding a
    /// `dump.log`) is refused with one line and left as it was.
    pub fn beside(image: &Path) -> Result<StagedImage> {
        let staged = fsguard::Staged::beside(image, IMAGE_DIR).map_err(guard_err)?;
        Ok(StagedImage(staged))
    }

    /// Where the capture writes (absolute).
    pub fn path(&self) -> PathBuf {
        let p = self.0.path();
        std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
    }

    /// The image in place of whatever was at its destination; returns the
    /// destination, canonical.
    pub fn install(self) -> Result<PathBuf> {
        self.0.install().map_err(guard_err)
    }
}

/// Copies the shim `shim` into `image`/[`PRELOAD_DIR`]: CRIU restores its
/// mapping from that file, which must outlive the capture.
fn keep_preload(shim: &Path, image: &Path) -> Result<PathBuf> {
    let dir = image.join(PRELOAD_DIR);
    std::fs::create_dir_all(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    let name = shim.file_name().ok_or_else(|| {
        CheckpointError::InvalidRequest(format!("{} is not a file", shim.display()))
    })?;
    let kept = dir.join(name);
    fsguard::copy_atomic(shim, &kept).map_err(guard_err)?;
    Ok(kept)
}

pub fn capture(req: &CaptureRequest, criu: &Criu) -> Result<CaptureOutcome> {
    validate_call_and_delay(req.call, req.delay)?;
    let Some((program, args)) = req.command.split_first() else {
        return Err(CheckpointError::InvalidRequest(
            "no application given; use `tdg checkpoint capture -o IMAGE -- PROGRAM ARGS...`".into(),
        ));
    };
    if !running_as_root() {
        return Err(CheckpointError::NotRoot);
    }
    crate::criu::prepare_kdat_cache_dir()?;
    let staged = StagedImage::beside(&req.image)?;
    let previous = req.image.exists();
    let outcome = capture_into(req, criu, &staged.path(), program, args).map_err(|e| match e {
        CheckpointError::NotCaptured(why) if previous => CheckpointError::NotCaptured(format!(
            "{why} (the image already at {} is unchanged)",
            req.image.display()
        )),
        CheckpointError::InvalidRequest(why) if previous => {
            CheckpointError::InvalidRequest(format!(
                "{why} (the image already at {} is unchanged)",
                req.image.display()
            ))
        }
        e => e,
    })?;
    staged.install()?;
    Ok(outcome)
}

/// [`capture`] into the (empty, private) directory `image`: run the
/// application, read what its host library recorded, seal it with a
/// manifest.
pub(crate) fn capture_into(
    req: &CaptureRequest,
    criu: &Criu,
    image: &Path,
    program: &OsString,
    args: &[OsString],
) -> Result<CaptureOutcome> {
    let mut cmd = armed_command(req, criu, image, program, args)?;
    let (status, run_time) = run_application(&mut cmd, req, program)?;
    let info = dumped(req, image, status)?;
    let manifest = seal(req, criu, image, info)?;
    Ok(CaptureOutcome {
        manifest,
        run_time,
        exit_code: status.code(),
    })
}

/// The application's command with the host library armed: where to write
/// the image, which call to checkpoint, the shim (kept in the image) first
/// in `LD_PRELOAD`, and a session of its own tied to tdg.
fn armed_command(
    req: &CaptureRequest,
    criu: &Criu,
    image: &Path,
    program: &OsString,
    args: &[OsString],
) -> Result<Command> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(env::IMAGE, image)
        .env(env::CRIU, &criu.path)
        .env(env::CALL, req.call.to_string())
        .env(env::DELAY, req.delay.to_string())
        .env_remove(env::REPORT);
    match &req.site {
        Some(site) => cmd.env(env::SITE, site),
        None => cmd.env_remove(env::SITE),
    };
    // The original times the call after its dump (the image's own record
    // of it) with the clock the copies use.
    match crate::tsc::region_tsc_ghz() {
        Some(g) => cmd.env(env::TSC_GHZ, g.to_string()),
        None => cmd.env_remove(env::TSC_GHZ),
    };
    if let Some(lib) = &criu.libcriu {
        cmd.env(env::LIBCRIU, lib);
    }
    if let Some(shim) = &req.preload {
        cmd.env(
            "LD_PRELOAD",
            toolchain::ld_preload_with(&keep_preload(shim, image)?),
        );
    }
    if req.quiet {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    own_session_tied_to_tdg(&mut cmd);
    Ok(cmd)
}

/// The application gets a session of its own. CRIU refuses to dump a
/// process whose session leader it cannot see ("session leader ... is
/// outside of its pid namespace"), which is every process of a container
/// started without setsid — CI runners among them — if it inherits tdg's
/// session. As its own session leader the application's sid is its pid,
/// which the restore gives back in its fresh PID namespace.
/// Out of tdg's process group the terminal's Ctrl-C no longer reaches the
/// application, so it is tied to tdg instead: it is killed when tdg dies.
/// (A restored copy inherits the setting, harmlessly: its parent is the
/// restoring criu, which outlives it.)
fn own_session_tied_to_tdg(cmd: &mut Command) {
    let tdg_pid = std::process::id() as libc::pid_t;
    let reopen = crate::inherited::foreign_memory_devices();
    if !reopen.is_empty() {
        tracing::debug!("reopening inherited descriptors from another mount namespace: {reopen:?}");
    }
    // SAFETY: setsid, prctl, getppid, raise, open, dup2 and close are
    // async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            crate::inherited::reopen_in_child(&reopen)?;
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            toolchain::die_with_tdg(tdg_pid)
        });
    }
}

/// Runs the application to its end (or its time limit): its exit status
/// and how long it ran, checkpoint included.
fn run_application(
    cmd: &mut Command,
    req: &CaptureRequest,
    program: &OsString,
) -> Result<(std::process::ExitStatus, Duration)> {
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| {
        CheckpointError::InvalidRequest(format!(
            "cannot start {}: {e}",
            Path::new(program).display()
        ))
    })?;
    // The application leads its own session, hence its own process group:
    // a timeout ends everything it started that stayed in it.
    let Some(toolchain::Finished { status, leftovers }) =
        toolchain::wait_or_kill_group(&mut child, req.timeout)
            .map_err(io_err("waiting for the application"))?
    else {
        return Err(CheckpointError::NotCaptured(format!(
            "the application did not finish within {} and was killed with every process it started (its process group); raise --timeout",
            toolchain::limit_text(&req.timeout.unwrap_or_default())
        )));
    };
    let run_time = started.elapsed();
    if !leftovers.is_empty() {
        tracing::warn!(
            "the application exited and left {} running in its process group; tdg killed {}",
            leftovers.join(", "),
            if leftovers.len() == 1 { "it" } else { "them" }
        );
    }
    Ok((status, run_time))
}

/// What the host library recorded of the dump in `image`: an error naming
/// the cause when the application never reached the call, or CRIU failed.
fn dumped(
    req: &CaptureRequest,
    image: &Path,
    status: std::process::ExitStatus,
) -> Result<CaptureInfo> {
    if !image.join(CAPTURE_INFO_FILE).exists() {
        let site = req.site.as_deref().unwrap_or("(first marked)");
        let check = if req.preload.is_some() {
            "check --call, and that the program calls the spec's routine through a shared library (`tdg profile --spec` counts its calls)"
        } else {
            "check --site/--call, and that it is built with tdg_checkpoint.c and calls tdg_region_begin"
        };
        return Err(CheckpointError::NotCaptured(format!(
            "the application ended ({status}) before call {} of region {site}, where the checkpoint goes; {check}",
            req.call - req.delay
        )));
    }
    let info = CaptureInfo::read(image)?;
    if info.ok {
        return Ok(info);
    }
    let log = image.join(DUMP_LOG_FILE);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    // The staged image goes with the error: the log is kept apart.
    let log = fsguard::keep_copy(&log, "tdg-dump").unwrap_or(log);
    let cause = if text.is_empty() {
        info.error
            .clone()
            .unwrap_or_else(|| "no dump log was written".into())
    } else {
        diagnose_log(&text)
    };
    Err(CheckpointError::Criu {
        action: "dump",
        cause,
        log,
    })
}

/// The manifest of the dumped `image`, written into it: what was captured,
/// from which binary, by which tdg and CRIU, with each file's checksum.
fn seal(req: &CaptureRequest, criu: &Criu, image: &Path, info: CaptureInfo) -> Result<Manifest> {
    let exe_size = std::fs::metadata(&info.exe).map(|m| m.len()).unwrap_or(0);
    let manifest = Manifest {
        format: MANIFEST_FORMAT,
        tdg_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        command: req
            .command
            .iter()
            .map(|a| a.to_string_lossy().to_string())
            .collect(),
        cwd: std::env::current_dir().unwrap_or_default(),
        exe_sha256: sha256_file(&info.exe)?,
        exe: info.exe.clone(),
        exe_size,
        site: info.site.clone(),
        call: info.call,
        delay: info.delay,
        criu_version: criu.version.to_string(),
        files: checksum_image(image)?,
        captured_call: crate::manifest::CapturedCall::read(image),
        capture: info,
    };
    manifest.write(image)?;
    Ok(manifest)
}
