//! Every wait of tdg's is bounded from the command line: each time-limit
//! option refuses a value past its cap with a usage error (never a panic),
//! and an application that exits is not waited for past its exit, nor is
//! what it left running allowed to run on.

use crate::support::{stderr, tdg, tdg_command};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The subcommand paths under `tdg` (as `tdg --help` lists them, recursively).
fn subcommands(path: &[String]) -> Vec<Vec<String>> {
    let mut args: Vec<String> = path.to_vec();
    args.push("--help".into());
    let help = crate::support::stdout(&tdg(&args));
    let mut out = Vec::new();
    let mut in_commands = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
            else {
                break;
            };
            if name == "help" || line.starts_with("   ") {
                continue;
            }
            let mut sub = path.to_vec();
            sub.push(name.to_string());
            out.extend(subcommands(&sub));
            out.push(sub);
        }
    }
    out
}

/// The options of a command that are time limits in seconds.
fn time_limit_options(path: &[String]) -> Vec<String> {
    let mut args: Vec<String> = path.to_vec();
    args.push("--help".into());
    let help = crate::support::stdout(&tdg(&args));
    let mut found: Vec<String> = help
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| w.trim_end_matches([',', '.', ')', ']']).to_string())
        .filter(|w| (w.contains("timeout") || w == "max-time") && !w.contains('='))
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn every_time_limit_refuses_a_value_past_its_cap_in_one_usage_line() {
    let mut checked = Vec::new();
    for path in subcommands(&[]) {
        for option in time_limit_options(&path) {
            for value in [
                "18446744073709551615",
                "604801",
                "0",
                "99999999999999999999999",
            ] {
                let mut args = path.clone();
                args.push(format!("--{option}"));
                args.push(value.into());
                let out = tdg(&args);
                let err = stderr(&out);
                assert_eq!(out.status.code(), Some(2), "tdg {}: {err}", args.join(" "));
                assert!(
                    err.contains("1 to 604800 seconds") && !err.contains("panicked"),
                    "tdg {}: {err}",
                    args.join(" ")
                );
            }
            checked.push(format!("{} --{option}", path.join(" ")));
        }
    }
    // The walk found the options it is for (a renamed --help would
    // otherwise make this test check nothing).
    for expected in [
        "run --timeout",
        "tune --timeout",
        "tune --controller-timeout",
        "checkpoint capture --timeout",
        "checkpoint time --timeout",
        "checkpoint time --max-time",
        "checkpoint validate --timeout",
        "checkpoint inapp --timeout",
        "checkpoint sites --timeout",
    ] {
        assert!(
            checked.iter().any(|c| c == expected),
            "{expected} not among {checked:?}"
        );
    }
}

/// `checkpoint inapp --timeout 5 -- sh -c './app; sleep 1000 &'`: the runs
/// end when the application does (the leftover holds the output pipes),
/// and the leftover is killed and named, not left running as root.
#[test]
fn inapp_returns_when_the_application_exits_and_kills_its_leftover() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let o = tdg(&[
        "checkpoint".as_ref(),
        "lib".as_ref(),
        "-o".as_ref(),
        lib.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let apps = Path::new(env!("CARGO_MANIFEST_DIR")).join("checkpoint/tests/apps");
    let exe = dir.path().join("datasens");
    let cc = Command::new("cc")
        .args(["-O2", "-I"])
        .arg(&lib)
        .arg(apps.join("datasens.c"))
        .arg(apps.join("isort.c"))
        .arg(lib.join("tdg_checkpoint.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let pidfile = dir.path().join("leftover.pid");
    let script = format!(
        "{} sort {} > /dev/null; sleep 1000 & echo $! > {}",
        exe.display(),
        dir.path().join("out.txt").display(),
        pidfile.display()
    );
    let started = Instant::now();
    let out = tdg_command()
        .args([
            "checkpoint",
            "inapp",
            "--site",
            "sort",
            "--call",
            "3",
            "--runs",
            "1",
            "--timeout",
            "5",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        took < Duration::from_secs(30),
        "waited {took:?} for the leftover"
    );
    assert!(
        // (`sh`: the job may still be the shell's fork when it is killed)
        err.contains("exited and left") && err.contains("tdg killed"),
        "the leftover is named: {err}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!testkit::alive(pid), "the leftover {pid} is still running");
}
