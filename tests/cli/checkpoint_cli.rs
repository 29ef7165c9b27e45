//! `tdg checkpoint` and `tdg doctor` from the command line, with real CRIU
//! (root and `scripts/setup` needed, as in CI).

use crate::support::{tdg_command, text, TDG};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/checkpoint/tests/apps");

/// `tdg ARGS`, the arguments strings and paths alike.
fn tdg(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    crate::support::tdg(args)
}

/// `tdg checkpoint lib` output is all a user needs to build an application.
fn build_app(dir: &Path) -> PathBuf {
    build_with_host_library(dir, &["datasens.c", "isort.c"], "datasens", &[])
}

/// `exe` in `dir`, built from `sources` of checkpoint/tests/apps with
/// `flags` and the host library `tdg checkpoint lib` writes.
pub(crate) fn build_with_host_library(
    dir: &Path,
    sources: &[&str],
    exe: &str,
    flags: &[&str],
) -> PathBuf {
    let lib = dir.join("hostlib");
    let o = tdg(&[&"checkpoint", &"lib", &"-o", &lib]);
    assert!(o.status.success(), "{:?}", text(&o));
    let exe = dir.join(exe);
    // The library's source, as written, compiled to an object through the
    // build cache (one compile for every test that builds an application).
    let host = checkpoint::HostLibrary::in_dir(&lib);
    let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
    let object = host
        .object(
            &toolchain::CCompiler::find(Some("cc")).unwrap(),
            cache.as_ref(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let cc = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .args(flags)
        .arg("-I")
        .arg(&lib)
        .args(sources.iter().map(|s| Path::new(APPS).join(s)))
        .arg(object)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

#[test]
fn capture_then_time_json_from_the_command_line() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_app(dir.path());
    let img = PathBuf::from(format!("/dev/shm/tdg-cli-{}", std::process::id()));
    let out = dir.path().join("out.txt");
    let o = tdg(&[
        &"checkpoint",
        &"capture",
        &"--site",
        &"search",
        &"--call",
        &"6",
        &"--delay",
        &"2",
        &"-o",
        &img,
        &"--",
        &exe,
        &"search",
        &out,
    ]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    assert!(
        se.contains("captured") && se.contains("call 6, delay 2"),
        "{se}"
    );
    // The application ran to completion and its output is intact.
    assert!(std::fs::read_to_string(&out).unwrap().contains("checksum"));

    // The same commands as versioned JSON documents, written to --out: the
    // application's own output has stdout.
    let doc = dir.path().join("doc.json");
    let json = |tdg_args: &[&str], image: Option<&Path>| {
        let mut c = tdg_command();
        c.args(tdg_args);
        if let Some(image) = image {
            c.arg("-o").arg(image);
        }
        let o = c
            .args(["--format", "json", "--out"])
            .arg(&doc)
            .arg("--")
            .arg(&exe)
            .arg("search")
            .arg(&out)
            .output()
            .unwrap();
        let (so, se) = text(&o);
        assert!(o.status.success(), "{so}{se}");
        let written = std::fs::read_to_string(&doc).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&written).unwrap_or_else(|e| panic!("{e}: {written}"));
        assert_eq!(v["version"], formats::JSON_VERSION, "{v}");
        v
    };
    let img2 = img.with_extension("json-capture");
    let v = json(
        &["checkpoint", "capture", "--site", "search", "--call", "6"],
        Some(&img2),
    );
    assert_eq!(v["manifest"]["call"], 6, "{v}");
    let _ = std::fs::remove_dir_all(&img2);
    let v = json(&["checkpoint", "sites"], None);
    assert!(v.to_string().contains("search"), "{v}");
    let v = json(
        &[
            "checkpoint",
            "inapp",
            "--site",
            "search",
            "--call",
            "6",
            "--runs",
            "2",
        ],
        None,
    );
    assert_eq!(v["call"], 6, "{v}");

    let o = tdg(&[
        &"checkpoint",
        &"time",
        &img,
        &"--samples",
        &"7",
        &"--format",
        &"json",
    ]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    let v: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    assert_eq!(v["version"], formats::JSON_VERSION, "{v}");
    assert_eq!(v["samples_ns"].as_array().unwrap().len(), 7);
    assert_eq!(v["delay"], 2);
    let (min, med, max) = (
        v["region_ns"]["min"].as_f64().unwrap(),
        v["region_ns"]["median"].as_f64().unwrap(),
        v["region_ns"]["max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= med && med <= max, "{v}");

    let o = tdg(&[&"checkpoint", &"time", &img, &"-r", &"3"]);
    let (so, _) = text(&o);
    assert!(
        so.contains("took 3 samples in 1 restore(s), a fork of the restored copy each")
            && so.contains("region wall time: min"),
        "{so}"
    );
    let o = tdg(&[
        &"checkpoint",
        &"time",
        &img,
        &"-r",
        &"3",
        &"--restore-per-sample",
    ]);
    let (so, _) = text(&o);
    assert!(
        so.contains("restored 3 times") && so.contains("region wall time: min"),
        "{so}"
    );

    // A spec whose checkpoint clause names the image: `tdg run SPEC` times the
    // image (no --impl needed). With --impl the candidate runs in the copies,
    // but this region makes no TDG_ROUTINE call: that is said, not ignored.
    let spec = img.with_extension("spec");
    let image_name = img.file_name().unwrap().to_string_lossy().to_string();
    std::fs::write(
        &spec,
        format!(
            "routine=void search(long key);\ninit={{ key=Macro(KEY, 1); }};\n\
             checkpoint={{ image=\"{image_name}\"; mode=delayed(2); }};\n"
        ),
    )
    .unwrap();
    let o = tdg(&[&"run", &spec, &"--samples", &"3", &"--json"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    let v: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    assert_eq!(v["samples_ns"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["delay"], 2);
    let o = tdg(&[&"run", &spec, &"--impl", &Path::new(APPS).join("isort.c")]);
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert!(
        se.contains("was never called") && se.contains("TDG_ROUTINE"),
        "{se}"
    );
    let _ = std::fs::remove_file(&spec);
    let _ = std::fs::remove_dir_all(&img);
}

/// Fields of `/proc/PID/stat` counted after the command name, which may
/// itself hold spaces and parentheses (proc(5): state is field 3, session 6).
const STATE: usize = 0;
const SID: usize = 3;
fn stat_field(stat: &str, index: usize) -> Option<&str> {
    stat.rsplit_once(')')?.1.split_whitespace().nth(index)
}

/// `program` inside a fresh PID (and mount) namespace that does not contain
/// its session leader: how CI runners and containers started without setsid
/// look from inside. Its stdin (`/dev/null`, opened by this test before the
/// namespace existed) comes from another mount namespace, as a container
/// runtime's does.
fn outside_session(program: &Path) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(program);
    cmd
}

#[test]
fn capture_works_when_the_session_leader_is_outside_the_pid_namespace() {
    let _alone = testkit::exclusive();
    // The condition itself: inside such a namespace a process's session id is 0.
    let stat = outside_session(Path::new("cat"))
        .arg("/proc/self/stat")
        .output()
        .unwrap();
    let stat = String::from_utf8_lossy(&stat.stdout).to_string();
    assert_eq!(stat_field(&stat, SID), Some("0"), "{stat}");

    let dir = tempfile::tempdir().unwrap();
    let exe = build_app(dir.path());
    let img = PathBuf::from(format!("/dev/shm/tdg-cli-nosession-{}", std::process::id()));
    let o = outside_session(Path::new(TDG))
        .args([
            "checkpoint",
            "capture",
            "--site",
            "search",
            "--call",
            "4",
            "--delay",
            "1",
        ])
        .arg("-o")
        .arg(&img)
        .arg("--")
        .arg(&exe)
        .arg("search")
        .arg(dir.path().join("out.txt"))
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    let o = outside_session(Path::new(TDG))
        .args(["checkpoint", "time"])
        .arg(&img)
        .args(["--samples", "3", "--json"])
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    let v: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    assert_eq!(v["samples_ns"].as_array().unwrap().len(), 3, "{v}");
    let _ = std::fs::remove_dir_all(&img);
}

/// The application leads its own session, out of reach of the terminal's
/// Ctrl-C, so it must die with tdg rather than run on unattended.
#[test]
fn application_being_captured_dies_with_tdg() {
    let _alone = testkit::exclusive();
    let img = PathBuf::from(format!("/dev/shm/tdg-cli-orphan-{}", std::process::id()));
    let mut tdg = tdg_command()
        .args(["checkpoint", "capture", "-o"])
        .arg(&img)
        .args(["--", "sleep", "60"])
        .spawn()
        .unwrap();
    let children = format!("/proc/{0}/task/{0}/children", tdg.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let app: u32 = loop {
        let listed = std::fs::read_to_string(&children).unwrap_or_default();
        let sleeping = listed.split_whitespace().find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        if let Some(pid) = sleeping {
            break pid.parse().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tdg started no application"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let stat = std::fs::read_to_string(format!("/proc/{app}/stat")).unwrap();
    assert_eq!(
        stat_field(&stat, SID),
        Some(app.to_string().as_str()),
        "its own session: {stat}"
    );
    tdg.kill().unwrap();
    tdg.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while Path::new(&format!("/proc/{app}")).exists() {
        // Gone, or a zombie waiting for init to reap it.
        let stat = std::fs::read_to_string(format!("/proc/{app}/stat")).unwrap_or_default();
        if stat_field(&stat, STATE) == Some("Z") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "application {app} outlived tdg"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&img);
}

#[test]
fn failures_are_one_line_with_a_way_out() {
    let _alone = testkit::exclusive();
    let o = tdg(&[&"checkpoint", &"time", &"/nonexistent/image"]);
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert_eq!(se.trim().lines().count(), 1, "{se}");
    assert!(
        se.starts_with("tdg: error: ") && se.contains("not a tdg checkpoint image"),
        "{se}"
    );

    let dir = tempfile::tempdir().unwrap();
    let exe = build_app(dir.path());
    let img = dir.path().join("img");
    let o = tdg(&[
        &"checkpoint",
        &"capture",
        &"--call",
        &"40",
        &"-o",
        &img,
        &"--",
        &exe,
        &"search",
        &dir.path().join("o"),
    ]);
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert!(
        se.contains("before call 40") && se.contains("check --site/--call"),
        "{se}"
    );

    let o = tdg_command()
        .args(["checkpoint", "time"])
        .arg(&img)
        .env("TDG_CRIU", "/nonexistent/criu")
        .output()
        .unwrap();
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert_eq!(se.trim().lines().count(), 1, "{se}");
}

#[test]
fn doctor_reports_criu_and_readiness() {
    let _alone = testkit::exclusive();
    let o = tdg(&[&"doctor"]);
    let (so, se) = text(&o);
    assert!(o.status.success(), "{so}{se}");
    assert!(
        so.contains("criu 4.") && so.contains("criu check: Looks good"),
        "{so}"
    );
    assert!(so.contains("checkpointing: ready"), "{so}");

    // With a criu that does not exist the doctor says so and how to fix it.
    let o = tdg_command()
        .arg("doctor")
        .env("TDG_CRIU", "/nonexistent/criu")
        .output()
        .unwrap();
    let (so, _) = text(&o);
    assert!(!o.status.success());
    assert!(
        so.contains("CRIU not found") && so.contains("fix: scripts/setup"),
        "{so}"
    );
    assert!(so.contains("checkpointing: NOT ready"), "{so}");
    assert_eq!(
        o.status.code(),
        Some(7),
        "the contract's machine-not-ready status"
    );

    let o = tdg(&[&"doctor", &"--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["can_checkpoint"], true);
    assert_eq!(v["version"], formats::JSON_VERSION, "{v}");
}

/// tdg runs criu as root: the one it runs is the one `PATH` names, never
/// one it finds beside its own build tree (`.deps/bin`).
#[test]
fn criu_is_the_one_on_path_not_the_build_trees() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("criu");
    std::fs::write(&fake, "#!/bin/sh\necho 'Version: 4.1.1'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fake = fake.canonicalize().unwrap();
    let o = tdg_command()
        .args(["doctor", "--json"])
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", dir.path().display()),
        )
        .env_remove("TDG_CRIU")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    let found = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["what"].as_str())
        .find(|w| w.starts_with("criu 4."))
        .unwrap_or_else(|| panic!("no criu finding: {v}"))
        .to_string();
    assert!(
        found.ends_with(&format!("at {}", fake.display())),
        "{found}"
    );
}

#[test]
fn not_root_and_too_old_criu_are_named_with_the_fix() {
    // Not root: drop to nobody with util-linux's setpriv.
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(TDG)
        .args(["checkpoint", "time", "/nonexistent/image"])
        .output()
        .unwrap();
    let (_, se) = text(&o);
    assert!(!o.status.success());
    assert!(se.contains("needs root") && se.contains("sudo"), "{se}");
    assert_eq!(se.trim().lines().count(), 1, "{se}");

    // A CRIU older than 4.1 (a stand-in that reports 3.17, like bookworm's).
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("criu");
    std::fs::write(&fake, "#!/bin/sh\necho 'Version: 3.17'\n").unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&fake)
        .status()
        .unwrap();
    let o = tdg_command()
        .arg("doctor")
        .env("TDG_CRIU", &fake)
        .output()
        .unwrap();
    let (so, _) = text(&o);
    assert!(!o.status.success());
    assert!(
        so.contains("version 3.17") && so.contains(">= 4.1") && so.contains("scripts/setup"),
        "{so}"
    );
}
