//! Running the one binary under test, `tdg`, for every module of this test
//! binary: arguments, working directory and environment in, output captured.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// The `tdg` binary cargo built for these tests.
pub const TDG: &str = env!("CARGO_BIN_EXE_tdg");

/// `tdg` as a command to add arguments, environment or stdio to.
pub fn tdg_command() -> Command {
    Command::new(TDG)
}

/// `tdg ARGS`, output captured.
pub fn tdg<S: AsRef<OsStr>>(args: &[S]) -> Output {
    tdg_command().args(args).output().expect("tdg runs")
}

/// `tdg ARGS` run in `dir`, output captured.
pub fn tdg_in<S: AsRef<OsStr>>(args: &[S], dir: &Path) -> Output {
    tdg_command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("tdg runs")
}

/// `tdg ARGS` with extra environment variables.
pub fn tdg_env<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &str)]) -> Output {
    tdg_command()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("tdg runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (stdout, stderr) as text.
pub fn text(o: &Output) -> (String, String) {
    (stdout(o), stderr(o))
}

/// The JSON a successful tdg command printed (fails the test with its
/// stderr otherwise).
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}
