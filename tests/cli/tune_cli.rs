//! `tdg tune` end to end on the blocked GEMM example: real drivers, real
//! compiles, small spaces so the suite stays quick.

use crate::support::tdg_command;
use std::path::Path;
use std::process::Output;
use testkit::repo;

fn tdg(cache: &Path, args: &[&str]) -> Output {
    tdg_with(cache, args, &[])
}

fn tdg_with(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let spec = repo().join("specs/blocked_gemm.spec");
    let kernel = repo().join("specs/blocked_gemm.c");
    tdg_command()
        .env("TDG_CACHE_DIR", cache)
        .envs(env.iter().copied())
        .arg("tune")
        .arg(&spec)
        .arg("--impl")
        .arg(&kernel)
        .args(args)
        .output()
        .unwrap()
}

fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn exhaustive_picks_the_register_blocked_variant() {
    let _alone = testkit::exclusive();
    // 1x1 register tiles reload C every multiply-add; 4x4 keeps 16
    // accumulators in registers: several times faster on any machine.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ex.jsonl");
    // The drivers' own defaults come from sysfs here (TDG_NO_PROBE), so a
    // probe result appearing can only mean the search itself measured the
    // machine for a model start, which exhaustive search must not need.
    let out = tdg_with(
        dir.path(),
        &[
            "--param",
            "NB=64",
            "--param",
            "MU=1,4",
            "--param",
            "NU=1,4",
            "--exhaustive",
            "--json",
            "-D",
            "MS=128",
            "-D",
            "NS=128",
            "-D",
            "KS=128",
            "--log",
            log.to_str().unwrap(),
        ],
        &[("TDG_NO_PROBE", "1")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["best_description"], "NB=64 MU=4 NU=4", "{o}");
    assert_eq!(o["evaluations"], 4);
    let (lines, finals): (Vec<_>, Vec<_>) = log_lines(&log)
        .into_iter()
        .partition(|l| l["phase"] != "final");
    assert_eq!(lines.len(), 4);
    // The three best re-timed side by side (in rounds until decided or
    // tied) name the best: its time is one of its re-timings.
    assert!(
        finals.len() >= 3 && finals.len().is_multiple_of(3),
        "{finals:?}"
    );
    assert!(
        finals
            .iter()
            .any(|l| l["config"] == o["best"] && l["time_ns"] == o["best_ns"]),
        "{o} {finals:?}"
    );
    // The outcome says where the evaluations' time went.
    assert_eq!(o["split_evaluations"], 4, "{o}");
    for part in ["build_s", "sampling_s", "total_s"] {
        assert!(o["time_split"][part].as_f64().unwrap() > 0.0, "{part}: {o}");
    }
    // Every evaluation says how its timing ended and where its time went.
    assert!(
        lines
            .iter()
            .all(|l| l["stopped"].is_string() && l["split"]["build_s"].is_f64()),
        "{lines:?}"
    );
    let t = |mu: i64, nu: i64| {
        lines
            .iter()
            .find(|l| l["config"]["MU"] == mu && l["config"]["NU"] == nu)
            .unwrap()["time_ns"]
            .as_f64()
            .unwrap()
    };
    assert!(
        t(1, 1) > 2.0 * t(4, 4),
        "1x1 {} vs 4x4 {}",
        t(1, 1),
        t(4, 4)
    );
    assert!(
        !dir.path().join("probe.json").exists(),
        "exhaustive search needs no probe"
    );
}

#[test]
fn search_starts_from_the_probe_model_and_never_repeats_a_configuration() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // The machine's probe as scripts/test made it, where there is one: the
    // model reads it, and measuring again would take seconds (probe_cli
    // shows the measuring and the caching).
    let suite_probe = std::env::var_os("TDG_CACHE_DIR")
        .map(|d| Path::new(&d).join("probe.json"))
        .and_then(|p| std::fs::read(p).ok());
    if let Some(bytes) = &suite_probe {
        std::fs::write(dir.path().join("probe.json"), bytes).unwrap();
    }
    let log = dir.path().join("tune.jsonl");
    let out = tdg(
        dir.path(),
        &[
            "--param",
            "NB=16:128:16",
            "--param",
            "MU=1:8",
            "--param",
            "NU=1:4",
            "--budget",
            "6",
            "--json",
            "-D",
            "MS=96",
            "-D",
            "NS=96",
            "-D",
            "KS=96",
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cached = std::fs::read(dir.path().join("probe.json"))
        .expect("the probe ran once for the model and was cached");
    if let Some(bytes) = &suite_probe {
        assert!(&cached == bytes, "a cached probe was measured again");
    }
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (lines, finals): (Vec<_>, Vec<_>) = log_lines(&log)
        .into_iter()
        .partition(|l| l["phase"] != "final");
    assert_eq!(lines.len() as u64, o["evaluations"].as_u64().unwrap());
    assert!(lines.len() <= 6);
    assert_eq!(lines[0]["phase"], "model");
    assert!(
        o["starts"][0].as_str().unwrap().contains("tile for L1"),
        "{o}"
    );
    let configs: Vec<String> = lines.iter().map(|l| l["config"].to_string()).collect();
    let mut uniq = configs.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(
        uniq.len(),
        configs.len(),
        "a configuration was built twice: {configs:?}"
    );
    // The best is the leader of the finalists' side-by-side re-timing:
    // its time is one of its re-timings.
    assert!(
        finals
            .iter()
            .any(|l| l["config"] == o["best"] && l["time_ns"] == o["best_ns"]),
        "{o} {finals:?}"
    );

    // A kernel whose parameters have other names, given roles by its
    // spec's tune clause: the model chooses every one of them (its reason
    // is never an empty `(model: )`), and `--strategy model` times that
    // choice alone, with the probe now cached.
    let spec = repo().join("specs/tiled_matmul.spec");
    let out = tdg_command()
        .env("TDG_CACHE_DIR", dir.path())
        .arg("tune")
        .arg(&spec)
        .arg("--impl")
        .arg(repo().join("specs/tiled_matmul.c"))
        .args([
            "--param",
            "TILE=16:128:16",
            "--param",
            "RT_R=1:8",
            "--param",
            "RT_C=1:8",
            "--strategy",
            "model",
            "-D",
            "MS=64",
            "-D",
            "NS=64",
            "-D",
            "KS=64",
            "--log",
        ])
        .arg(dir.path().join("model.jsonl"))
        .output()
        .unwrap();
    let (table, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("roles TILE=tile (the spec's tune clause), RT_R=rows (the spec's tune clause), RT_C=cols (the spec's tune clause)"),
        "{err}"
    );
    let start = err
        .lines()
        .find(|l| l.contains("tdg tune: start "))
        .unwrap_or_else(|| panic!("no start line: {err}"));
    for name in ["TILE=", "RT_R=", "RT_C="] {
        assert!(
            start.split("model: ").nth(1).unwrap_or("").contains(name),
            "the model says nothing of {name}: {start}"
        );
    }
    assert!(
        table.contains("(its choice, 0 evaluations)") && table.contains("per call once timed"),
        "{table}"
    );
    assert!(
        table.contains("evaluations  1 of 512 configurations"),
        "{table}"
    );
}

#[test]
fn a_configuration_that_violates_a_constraint_is_never_compiled() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    // The kernel refuses to compile exactly the configurations the two
    // constraints rule out (the spec's: MU != 3; the command line's: MU
    // <= NB / 8, so MU=4 at NB=16): if either were ignored, a build would
    // fail and the search would report it.
    let kernel = dir.path().join("guarded.c");
    std::fs::write(
        &kernel,
        format!(
            "#if MU == 3\n#error \"MU=3 breaks the spec's constraint and was compiled\"\n#endif\n\
             #if MU > NB / 8 && MU != 5\n#error \"MU > NB/8 breaks --constraint and was compiled\"\n#endif\n\
             #include \"{}\"\n",
            repo().join("specs/blocked_gemm.c").display()
        ),
    )
    .unwrap();
    let spec = dir.path().join("guarded.spec");
    std::fs::write(
        &spec,
        std::fs::read_to_string(repo().join("specs/blocked_gemm.spec")).unwrap()
            + "tune={ constraint=\"MU != 3\"; };\n",
    )
    .unwrap();
    let log = dir.path().join("c.jsonl");
    let out = tdg_command()
        .env("TDG_NO_PROBE", "1")
        .env("TDG_CACHE_DIR", dir.path())
        .arg("tune")
        .arg(&spec)
        .arg("--impl")
        .arg(&kernel)
        .args([
            "--param",
            "NB=16",
            "--param",
            "MU=1:5",
            "--param",
            "NU=1",
            "--constraint",
            "MU <= NB / 8 || MU == 5",
            "--exhaustive",
            "--json",
            "--max-time-ms",
            "20",
            "--min-time-ms",
            "1",
            "-D",
            "MS=32",
            "-D",
            "NS=32",
            "-D",
            "KS=32",
            "--log",
        ])
        .arg(&log)
        .output()
        .unwrap();
    let o: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    // The best's parameters in the order --param gave them (NB, MU, NU),
    // as the log has them, not sorted by name.
    let text = String::from_utf8_lossy(&out.stdout);
    let best = &text[text.find("\"best\": {").expect("a best")..];
    assert!(
        best.find("\"NB\"").unwrap() < best.find("\"MU\"").unwrap(),
        "{text}"
    );
    // MU=1, 2 and 5 are allowed; 3 and 4 never reach the compiler.
    assert_eq!(o["evaluations"], 3, "{o}");
    assert_eq!(o["failed"], 0, "{o}");
    assert_eq!(o["space_size"], 3, "{o}");
    assert_eq!(o["unconstrained_size"], 5, "{o}");
    // (The finalists' re-timing is logged too, as phase "final".)
    let lines = log_lines(&log);
    let tried: Vec<i64> = lines
        .iter()
        .filter(|l| l["phase"] != "final")
        .map(|l| l["config"]["MU"].as_i64().unwrap())
        .collect();
    assert_eq!(tried, [1, 2, 5]);
    assert!(lines
        .iter()
        .all(|l| ![3, 4].contains(&l["config"]["MU"].as_i64().unwrap())));
    // A constraint naming nothing tunable, and one that does not parse,
    // are one-line usage errors before anything is built.
    for (constraint, want) in [
        (
            "MX < 4",
            "`MX` is neither a tuned parameter (NB, MU, NU) nor a macro of the spec",
        ),
        ("MU = 4", "expected"),
        (
            "MU > 99",
            "no configuration of the --param ranges meets them all",
        ),
    ] {
        let out = tdg_command()
            .env("TDG_NO_PROBE", "1")
            .arg("tune")
            .arg(&spec)
            .arg("--impl")
            .arg(&kernel)
            .args(["--param", "NB=16", "--param", "MU=1:5", "--param", "NU=1"])
            .args(["--constraint", constraint, "--exhaustive", "--log"])
            .arg(dir.path().join("x.jsonl"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{constraint}: {err}");
        assert!(err.contains(want), "{constraint}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn bad_input_gets_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--param", "NB=64:16"], "empty"),
        (
            vec!["--param", "NB=16:64", "--start", "XX=3"],
            "not one of the --param names",
        ),
        (vec!["--param", "NB=16:64", "--budget", "0"], "budget"),
    ] {
        let out = tdg(dir.path(), &args);
        // A usage error, for the contract: every candidate would fail.
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        // Refused before anything is measured: no probe ran for a typo.
        assert!(
            !dir.path().join("probe.json").exists(),
            "{args:?} started a probe"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        // tdg's own errors are one line (clap's usage errors add a hint line).
        if err.starts_with("tdg: error") {
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
    let out = tdg_command()
        .args([
            "tune",
            repo().join("specs/blocked_gemm.spec").to_str().unwrap(),
            "--impl",
            "/nonexistent.c",
        ])
        .args(["--param", "NB=16", "--no-model"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no such file"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_kernel_that_does_not_compile_stops_the_search_with_the_compiler_message() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    // NB=0 trips the kernel's own #error on the first configuration. The
    // drivers' defaults come from sysfs: the compile error is the subject,
    // and a probe here would time the machine beside other tests.
    let out = tdg_with(
        dir.path(),
        &[
            "--param",
            "NB=0",
            "--no-model",
            "--log",
            dir.path().join("l").to_str().unwrap(),
        ],
        &[("TDG_NO_PROBE", "1")],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NB, MU and NU must be positive"), "{err}");
}

/// `code_offset` is a parameter of the candidate's placement, not a macro:
/// each configuration's driver places the routine there, so an offset its
/// 16-byte function alignment forbids fails with the driver's own
/// placement error, and allowed ones are timed.
#[test]
fn a_code_offset_parameter_places_each_configurations_code() {
    let dir = tempfile::tempdir().unwrap();
    // Its log in the test's own directory, not the working directory.
    let log = dir.path().join("offsets.jsonl");
    let common = [
        "--param",
        "NB=32",
        "--param",
        "MU=2",
        "--param",
        "NU=2",
        "--exhaustive",
        "--json",
        "-D",
        "MS=64",
        "-D",
        "NS=64",
        "-D",
        "KS=64",
        "--min-time-ms",
        "10",
        "--max-time-ms",
        "30",
        "--log",
        log.to_str().unwrap(),
        "--samples",
        "3",
    ];
    let odd = tdg(
        dir.path(),
        &[&common[..], &["--param", "code_offset=1,3"]].concat(),
    );
    let text =
        String::from_utf8_lossy(&odd.stdout).to_string() + &String::from_utf8_lossy(&odd.stderr);
    assert!(!odd.status.success(), "{text}");
    assert!(
        text.contains("code_offset=1") && text.contains("cannot start at page offset 1"),
        "{text}"
    );
    let placed = tdg(
        dir.path(),
        &[&common[..], &["--param", "code_offset=0,48"]].concat(),
    );
    assert!(
        placed.status.success(),
        "{}",
        crate::support::stderr(&placed)
    );
    let doc: serde_json::Value = serde_json::from_slice(&placed.stdout).unwrap();
    assert_eq!(
        doc["best"]["code_offset"].as_i64().map(|o| o % 48),
        Some(0),
        "{doc:#}"
    );
}

/// With probing off and nothing cached, the starting-point model is one
/// line with the way out, and nothing is measured behind the user's back.
#[test]
fn the_model_with_probing_off_and_no_probe_cached_measures_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let out = tdg_with(
        cache.path(),
        &["--param", "NB=16,32", "--budget", "2"],
        &[("TDG_NO_PROBE", "1")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("probing is off (TDG_NO_PROBE)") && err.contains("--no-model"),
        "{err}"
    );
    assert!(!cache.path().join("probe.json").exists(), "a probe ran");
}
