//! scripts/setup's helpers: a failed `apt-get update` is not remembered as
//! done, and the tuners' environment is pinned to the last dependency.
//! apt is replaced by a stand-in that behaves as apt 2.x does when an index
//! cannot be fetched: exit 0 with a warning, or 100 under `--error-on=any`.

use std::path::Path;
use std::process::{Command, Output};

/// This checkout's root: its scripts are the ones under test.
fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const FAKE_APT: &str = r#"#!/bin/sh
case " $* " in
  *" update "*)
    case " $* " in
      *" --error-on=any "*) echo "E: Some index files failed to download" >&2; exit 100 ;;
      *) echo "W: Failed to fetch http://deb.invalid/dists/bookworm/InRelease" >&2; exit 0 ;;
    esac ;;
  *) exit 0 ;;
esac
"#;

const FAKE_DPKG_QUERY: &str = "#!/bin/sh\nexit 1\n";

/// `bash -c SCRIPT` with common.sh sourced, fake apt tools first on PATH
/// and `deps` as TDG_DEPS.
fn with_common(deps: &Path, fake_bin: &Path, script: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(format!(". \"$TDG_ROOT/scripts/lib/common.sh\"; {script}"))
        .env("TDG_ROOT", repo())
        .env("TDG_DEPS", deps)
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", fake_bin.display()),
        )
        .output()
        .unwrap()
}

fn fake_apt(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in [("apt-get", FAKE_APT), ("dpkg-query", FAKE_DPKG_QUERY)] {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_failed_apt_update_is_not_remembered_as_done() {
    let dir = tempfile::tempdir().unwrap();
    let (deps, bin) = (dir.path().join("deps"), dir.path().join("bin"));
    std::fs::create_dir_all(&deps).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    fake_apt(&bin);

    let o = with_common(&deps, &bin, "apt_install some-package");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "the install went on: {err}");
    assert!(
        !deps.join(".apt-updated").exists(),
        "a failed update was marked done: {err}"
    );
    assert!(err.contains("could not fetch every package list"), "{err}");

    let dest = dir.path().join("src");
    let o = with_common(
        &deps,
        &bin,
        &format!("fetch_debian_source zlib trixie {}", dest.display()),
    );
    assert!(!o.status.success());
    assert!(
        !deps.join("apt-trixie/.updated").exists(),
        "a failed source-list refresh was marked done: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every package of the tuners' environment scripts/setup made is pinned
/// in the constraints 70-tuners.sh installs under, at the version installed.
#[test]
fn the_tuners_environment_is_pinned_to_its_last_dependency() {
    let constraints = std::fs::read_to_string(repo().join("scripts/setup.d/70-tuners.constraints"))
        .expect("scripts/setup.d/70-tuners.constraints");
    let script = std::fs::read_to_string(repo().join("scripts/setup.d/70-tuners.sh")).unwrap();
    assert!(
        script.contains("--constraint \"$constraints\""),
        "70-tuners.sh does not install under the constraints"
    );
    let norm = |s: &str| s.trim().to_lowercase().replace('_', "-");
    let mut pinned: Vec<String> = constraints
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(norm)
        .collect();
    assert!(pinned.iter().all(|l| l.contains("==")), "{pinned:?}");
    let pip = testkit::deps_dir().join("tuners-venv/bin/pip");
    let freeze = Command::new(&pip)
        .args(["freeze", "--disable-pip-version-check"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/setup makes it)", pip.display()));
    let mut installed: Vec<String> = String::from_utf8_lossy(&freeze.stdout)
        .lines()
        .map(norm)
        .collect();
    pinned.sort();
    installed.sort();
    assert_eq!(installed, pinned, "installed, then pinned");
}
