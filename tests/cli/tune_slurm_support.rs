//! A real single-node Slurm cluster for one test, started and stopped with
//! scripts/slurm-cluster (munged, slurmctld and slurmd in a temp dir).

use std::path::{Path, PathBuf};
use std::process::Command;

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
