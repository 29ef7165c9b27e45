//! A real single-node Slurm cluster for one test, started and stopped with
//! scripts/slurm-cluster (munged, slurmctld and slurmd in a temp dir).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub struct Cluster {
    dir: tempfile::TempDir,
    pub conf: PathBuf,
}

fn script() -> PathBuf {
    testkit::repo().join("scripts/slurm-cluster")
}

impl Cluster {
    /// `None` (after saying why on stderr) where no cluster can run at all
    /// (not root, Slurm not installed); any other failure to start fails
    /// the test.
    pub fn start() -> Option<Cluster> {
        let dir = tempfile::Builder::new()
            .prefix("tdg-slurm")
            .tempdir()
            .unwrap();
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(77) {
            eprintln!("{}", stderr.trim());
            return None;
        }
        assert!(
            out.status.success(),
            "the test cluster did not start: {stderr}"
        );
        let conf = dir.path().join("slurm.conf");
        Some(Cluster { dir, conf })
    }

    /// One cluster for the tests that only submit campaigns to it: started
    /// on first use (after a test's own untimed part, as [`Cluster::start`]
    /// would be), stopped and removed when the test binary exits. A start
    /// and a stop cost a few seconds, and each test's jobs are over before
    /// it returns. `None` where no cluster can run, as for `start`.
    pub fn shared() -> Option<&'static Cluster> {
        static SHARED: OnceLock<Option<Cluster>> = OnceLock::new();
        extern "C" fn stop_shared() {
            if let Some(Some(c)) = SHARED.get() {
                let _ = Command::new("bash")
                    .arg(script())
                    .arg("stop")
                    .arg(c.dir.path())
                    .status();
                let _ = std::fs::remove_dir_all(c.dir.path());
            }
        }
        SHARED
            .get_or_init(|| {
                let c = Cluster::start()?;
                // Statics are never dropped: the daemons are stopped at exit.
                // SAFETY: registers a plain function with no arguments.
                unsafe { libc::atexit(stop_shared) };
                Some(c)
            })
            .as_ref()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A Slurm client command against this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// Stops the daemons now (the directory stays until drop).
    pub fn stop(&self) {
        let status = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
