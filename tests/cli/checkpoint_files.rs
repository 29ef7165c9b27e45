//! Every substitution a restore makes is said (real CRIU; root and
//! `scripts/setup`, as in CI): `tdg checkpoint info` lists what the copies
//! get in place of each of the application's files, and `time`, `validate`
//! and `tune` warn once each about those that change what the region may
//! see (a read-write file replaced, a pipe closed).

use crate::support::{stderr, stdout, tdg_command};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn tdg(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    crate::support::tdg(args)
}

/// logcalls built with the host library, its log and data file, captured
/// with its stdout on a pipe whose reader is gone at the restore.
fn captured(dir: &Path) -> (PathBuf, PathBuf) {
    let exe = crate::checkpoint_cli::build_with_host_library(
        dir,
        &["logcalls.c"],
        "logcalls",
        &["-rdynamic"],
    );
    let data = dir.join("data.bin");
    std::fs::write(&data, vec![0u8; 4096]).unwrap();
    let img = PathBuf::from(format!("/dev/shm/tdg-cli-files-{}", std::process::id()));
    let o = tdg_command()
        .args([
            "checkpoint",
            "capture",
            "--site",
            "step",
            "--call",
            "5",
            "--delay",
            "2",
            "-o",
        ])
        .arg(&img)
        .arg("--")
        .arg(&exe)
        .arg("12")
        .arg(dir.join("run.log"))
        .arg(&data)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    (img, data)
}

#[test]
fn info_lists_every_substitution_and_time_validate_tune_warn_once_each() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (img, data) = captured(dir.path());
    // The application's own run: a line per call in its log (opened
    // O_APPEND). `validate` runs the application again (its plain runs add
    // whole runs, calls 1 to 12); a restored copy would add the calls it
    // replays (3, 4 and 5) out of that order.
    let log = dir.path().join("run.log");
    let data_bytes = std::fs::read(&data).unwrap();
    let untouched = |what: &str, runs: Option<usize>| {
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(
                *l,
                format!("call {}", i % 12 + 1),
                "{what}: a copy wrote into the user's log (line {})",
                i + 1
            );
        }
        assert_eq!(lines.len() % 12, 0, "{what}: {lines:?}");
        if let Some(runs) = runs {
            assert_eq!(lines.len(), 12 * runs, "{what}");
        }
        assert!(
            std::fs::read(&data).unwrap() == data_bytes,
            "{what}: a copy wrote into the user's data file"
        );
    };
    untouched("capture", Some(1));

    let o = tdg(&[&"checkpoint", &"info", &img]);
    let (so, se) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{se}");
    let line = |needle: &str| {
        so.lines()
            .filter(|l| l.starts_with("! ") || l.starts_with("  "))
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not listed:\n{so}"))
            .to_string()
    };
    let rw = line(&data.display().to_string());
    assert!(
        rw.starts_with('!') && rw.contains("private copy holding its content at the checkpoint"),
        "{rw}"
    );
    let log = line("run.log");
    assert!(
        log.starts_with(' ') && log.contains("appending") && log.contains("never written"),
        "{log}"
    );
    let pipe = line("pipe:[");
    assert!(
        pipe.starts_with('!') && pipe.contains("/dev/null"),
        "{pipe}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&tdg(&[
        &"checkpoint",
        &"info",
        &img,
        &"--format",
        &"json",
    ])))
    .unwrap();
    let kinds: Vec<&str> = v["substitutions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["treatment"].as_str())
        .collect();
    for k in ["read_write_replaced", "private_copy", "pipe_closed"] {
        assert!(kinds.contains(&k), "{k} not in {kinds:?}");
    }
    let stdout_pipe = v["substitutions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["fds"] == serde_json::json!([1]))
        .and_then(|s| s["target"].as_str())
        .unwrap()
        .to_string();

    // Each warned once per command, however many restores it makes.
    let warned_once = |o: &Output, what: &str| {
        let se = stderr(o);
        for needle in [format!("{}:", data.display()), format!("{stdout_pipe}:")] {
            let n = se
                .lines()
                .filter(|l| l.contains("warn") || l.contains("WARN"))
                .filter(|l| l.contains(&needle))
                .count();
            assert_eq!(n, 1, "{what}: {needle} warned {n} times:\n{se}");
        }
    };
    let o = tdg(&[
        &"checkpoint",
        &"time",
        &img,
        &"-r",
        &"3",
        &"--restore-per-sample",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    warned_once(&o, "time");
    untouched("time", Some(1));
    let o = tdg(&[
        &"checkpoint",
        &"validate",
        &img,
        &"--min-rounds",
        &"6",
        &"--max-rounds",
        &"6",
    ]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(8)),
        "{}",
        stderr(&o)
    );
    warned_once(&o, "validate");
    untouched("validate", None);
    let spec = dir.path().join("step.spec");
    std::fs::write(
        &spec,
        format!(
            "routine=void step(int call, long long* seen);\n\
             checkpoint={{ image=\"{}\"; mode=delayed(2); }};\n",
            img.display()
        ),
    )
    .unwrap();
    let cand = dir.path().join("step.c");
    std::fs::write(
        &cand,
        "void step(int call, long long *seen) { *seen = call * P; }\n",
    )
    .unwrap();
    // In the scratch directory: tune writes its log where it runs.
    let o = tdg_command()
        .arg("tune")
        .arg(&spec)
        .arg("--impl")
        .arg(&cand)
        .args([
            "--param",
            "P=1,2,3",
            "--exhaustive",
            "--no-model",
            "--no-verify",
            "--samples",
            "3",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    warned_once(&o, "tune");
    untouched("tune", None);
    let _ = std::fs::remove_dir_all(&img);
}
/// The checkpoint commands' counts past what they can do (a vector of
/// u64::MAX samples, runs or rounds) are usage errors naming the range,
/// not a panic allocating for them.
#[test]
fn counts_past_their_range_are_usage_errors_not_panics() {
    // Refused as the command line is read: nothing needs to exist.
    let dir = tempfile::tempdir().unwrap();
    let (img, data) = (dir.path().join("img"), dir.path().join("data.bin"));
    let exe = dir.path().join("logcalls");
    let max = "18446744073709551615";
    let app = |cmd: &mut Vec<std::ffi::OsString>| {
        cmd.push("--".into());
        cmd.push(exe.clone().into());
        cmd.push("12".into());
        cmd.push(dir.path().join("run.log").into());
        cmd.push(data.clone().into());
    };
    let mut cases: Vec<Vec<std::ffi::OsString>> = Vec::new();
    cases.push(vec![
        "checkpoint".into(),
        "time".into(),
        img.clone().into(),
        "-r".into(),
        max.into(),
    ]);
    for opt in ["-r", "--runs", "--min-rounds", "--max-rounds"] {
        cases.push(vec![
            "checkpoint".into(),
            "validate".into(),
            img.clone().into(),
            opt.into(),
            max.into(),
        ]);
    }
    let mut inapp: Vec<std::ffi::OsString> = [
        "checkpoint",
        "inapp",
        "--site",
        "step",
        "--call",
        "2",
        "--runs",
        max,
    ]
    .iter()
    .map(Into::into)
    .collect();
    app(&mut inapp);
    cases.push(inapp);
    for opt in ["--samples", "--max-rounds", "--inapp-runs"] {
        let mut c: Vec<std::ffi::OsString> = [
            "checkpoint",
            "capture",
            "--site",
            "step",
            "--call",
            "5",
            "--auto-delay",
            opt,
            max,
            "-o",
        ]
        .iter()
        .map(Into::into)
        .collect();
        c.push(dir.path().join("auto").into());
        app(&mut c);
        cases.push(c);
    }
    for args in cases {
        let o = tdg_command().args(&args).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("is not in 1..="), "{args:?}: {err}");
    }
}
