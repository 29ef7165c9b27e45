//! The command line's one contract: the exit-status table (the same in
//! `tdg --help` and docs/integration.md), `--help` grouped under headings,
//! `--format json` documents that carry a top-level "version" and `--out`,
//! and flags that take a command line split as a shell would.

use crate::support::{stderr, stdout, tdg, tdg_command};
use std::path::{Path, PathBuf};
use std::process::Output;
use testkit::repo;

const TABLE_START: &str = "<!-- exit-status table: generated from formats::contract::exit_status_markdown (TDG_BLESS=1 cargo test --release --test cli -- cli_contract:: rewrites it) -->\n";
const TABLE_END: &str = "<!-- end of exit-status table -->";

#[test]
fn the_exit_status_table_is_one_table_in_help_and_docs() {
    let help = tdg(&["--help"]);
    assert!(help.status.success());
    let help = stdout(&help);
    let footer = formats::contract::exit_status_help();
    assert!(help.trim_end().ends_with(&footer), "{help}");
    for row in formats::contract::exit_status_table() {
        assert!(help.contains(&format!("\n  {}  ", row.code)), "{help}");
    }

    let docs_path = repo().join("docs/integration.md");
    let docs = std::fs::read_to_string(&docs_path).unwrap();
    let start = docs
        .find(TABLE_START)
        .expect("docs/integration.md marks the table")
        + TABLE_START.len();
    let end = docs[start..]
        .find(TABLE_END)
        .expect("the table's end marker")
        + start;
    let want = formats::contract::exit_status_markdown();
    if std::env::var_os("TDG_BLESS").is_some() {
        let blessed = format!("{}{want}{}", &docs[..start], &docs[end..]);
        std::fs::write(&docs_path, blessed).unwrap();
        return;
    }
    assert_eq!(
        &docs[start..end],
        want,
        "docs/integration.md's exit-status table is not the one tdg prints; TDG_BLESS=1 rewrites it"
    );
}

/// The option lines of one `--help` section (`Heading:` up to a blank line
/// followed by the next heading).
fn section(help: &str, heading: &str) -> Vec<String> {
    let mut lines = help.lines().skip_while(|l| *l != format!("{heading}:"));
    assert!(lines.next().is_some(), "no `{heading}:` in\n{help}");
    lines
        .take_while(|l| !l.ends_with(':') || l.starts_with(' '))
        .filter(|l| l.trim_start().starts_with('-'))
        .map(str::to_string)
        .collect()
}

#[test]
fn help_groups_options_under_headings() {
    let help = stdout(&tdg(&["run", "-h"]));
    for (heading, option) in [
        ("Build", "--cflags"),
        ("Timing", "--flush"),
        ("Driver", "--no-touch"),
        ("Verification", "--tolerance"),
        ("Output", "--format"),
        ("Output", "--out"),
    ] {
        let lines = section(&help, heading);
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("{option} ")) || l.trim_end().ends_with(option)),
            "{option} is not under {heading}:\n{help}"
        );
    }
    // What is left ungrouped is tdg's own (-v, -q, -h, -V).
    assert!(section(&help, "Options").len() <= 4, "{help}");
    // Only the values each command writes, and the old switch hidden.
    assert!(
        help.contains("[possible values: table, json, csv, gbench]"),
        "{help}"
    );
    assert!(!help.contains("--json"), "{help}");
    let help = stdout(&tdg(&["tune", "-h"]));
    for heading in ["Search", "Build", "Timing", "Campaign", "Slurm", "Output"] {
        assert!(!section(&help, heading).is_empty(), "{heading}:\n{help}");
    }
    assert!(
        help.contains("[possible values: table, json, t4]"),
        "{help}"
    );
    let help = stdout(&tdg(&["probe", "-h"]));
    assert!(help.contains("[possible values: table, json]"), "{help}");
}

/// The JSON document a command wrote to `--out FILE`, after checking it
/// printed nothing else to stdout and carries the contract's version.
fn versioned(out: &Output, file: &Path, what: &str) -> serde_json::Value {
    assert!(
        out.stdout.is_empty(),
        "{what}: --out still printed {}",
        stdout(out)
    );
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{what}: no --out file ({e}): {}", stderr(out)));
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
    assert_eq!(v["version"], formats::JSON_VERSION, "{what}: {v}");
    v
}

fn cheap_timing() -> [&'static str; 8] {
    [
        "--flush",
        "none",
        "--samples",
        "3",
        "--min-time-ms",
        "1",
        "--max-time-ms",
        "20",
    ]
}

#[test]
fn every_report_command_writes_versioned_json_to_out() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = |name: &str| d.join(format!("{name}.json"));
    let run = |args: &[&str], name: &str| -> (Output, PathBuf) {
        let file = out(name);
        // Before a program's own arguments (`-- CMD ...`).
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let o = tdg_command()
            .args(&args[..at])
            .args(["--format", "json", "--out"])
            .arg(&file)
            .args(&args[at..])
            .current_dir(d)
            .env("TDG_NO_PROBE", "1")
            .output()
            .unwrap();
        (o, file)
    };
    let dot = repo().join("specs/dot.spec").display().to_string();
    let dot_c = repo().join("specs/dot.c").display().to_string();

    let (o, f) = run(&["check", &dot], "check");
    assert!(versioned(&o, &f, "check")["files"][0]["ok"]
        .as_bool()
        .unwrap());
    let (o, f) = run(&["explain", &dot, "-D", "NS=64"], "explain");
    assert_eq!(versioned(&o, &f, "explain")["routine"]["name"], "ddot");

    let mut args = vec!["run", dot.as_str(), "--impl", dot_c.as_str(), "-D", "NS=64"];
    args.extend(cheap_timing());
    let (o, f) = run(&args, "run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(versioned(&o, &f, "run")["routine"], "ddot");
    let mut sweep = args.clone();
    sweep.extend(["--flush-kb", "0,64"]);
    let (o, f) = run(&sweep, "sweep");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        versioned(&o, &f, "sweep")["reports"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let gemm = repo().join("specs/blocked_gemm.spec").display().to_string();
    let gemm_c = repo().join("specs/blocked_gemm.c").display().to_string();
    let mut args = vec![
        "tune",
        gemm.as_str(),
        "--impl",
        gemm_c.as_str(),
        "--param",
        "NB=16",
        "--param",
        "MU=1",
        "--param",
        "NU=1",
        "--no-model",
        "-D",
        "MS=16",
        "-D",
        "NS=16",
        "-D",
        "KS=16",
        "--log",
        "tune.jsonl",
    ];
    args.extend(cheap_timing());
    let (o, f) = run(&args, "tune");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(versioned(&o, &f, "tune")["evaluations"], 1);

    // Whether or not this machine can checkpoint, the report is a document.
    let (o, f) = run(&["doctor"], "doctor");
    assert!(versioned(&o, &f, "doctor")["can_checkpoint"].is_boolean());

    // A program with the profiling markers: profile it, report, derive a
    // spec from the profile, and validate the driver against it.
    std::fs::write(
        d.join("app.c"),
        "#include \"tdg_instrument.h\"\n\
         double ddot(const int N, const double* X, const double* Y);\n\
         static double x[64], y[64];\nvolatile double sink;\n\
         int main(void) {\n  for (int k = 0; k < 200; k++) { int n = k % 2 ? 64 : 32; TDG_PROFILE(\"ddot\", \"N:i\", sink = ddot(n, x, y), n); }\n  return 0;\n}\n",
    )
    .unwrap();
    let rt =
        instrument::runtime::build(&crate::instrument_support::cc(), &d.join("rt"), None).unwrap();
    let cc = crate::instrument_support::cc();
    cc.compile(&toolchain::CompileJob {
        sources: vec![d.join("app.c"), PathBuf::from(&dot_c)],
        output: d.join("app"),
        cflags: vec!["-O2".into()],
        include_dirs: vec![rt.include_dir.clone()],
        link_args: vec![rt.static_lib.display().to_string(), "-lpthread".into()],
        ..Default::default()
    })
    .unwrap();
    let (o, f) = run(&["profile", "-o", "app.tdgp", "--", "./app"], "profile");
    assert!(o.status.success(), "{}", stderr(&o));
    let v = versioned(&o, &f, "profile");
    assert_eq!(
        (v["exit_code"].as_i64(), v["routines"][0]["calls"].as_u64()),
        (Some(0), Some(200)),
        "{v}"
    );
    let (o, f) = run(&["profile", "report", "app.tdgp"], "report");
    assert_eq!(versioned(&o, &f, "profile report")["calls"], 200);
    let (o, f) = run(
        &[
            "spec-from-profile",
            "app.tdgp",
            "--spec",
            &dot,
            "-o",
            "derived.spec",
            "--contexts",
            "ctx.json",
        ],
        "spec-from-profile",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        versioned(&o, &f, "spec-from-profile")["spec"],
        "derived.spec"
    );
    let (o, f) = run(
        &[
            "validate",
            "app.tdgp",
            "--spec",
            &dot,
            "--impl",
            &dot_c,
            "--samples",
            "3",
        ],
        "validate",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(versioned(&o, &f, "validate")["validation"].is_object());

    // The program's own status is in the report; tdg's is the contract's.
    let (o, f) = run(
        &["profile", "-o", "x.tdgp", "--", "sh", "-c", "./app; exit 3"],
        "failed",
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        versioned(&o, &f, "profile of a failing program")["exit_code"],
        3
    );
}

#[test]
fn cflags_are_shell_words_and_a_quoted_macro_keeps_its_space() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let kernel = dir.path().join("ddot_msg.c");
    let dot_c = std::fs::read_to_string(repo().join("specs/dot.c")).unwrap();
    // sizeof "a b" is 4: the macro arrived as one argument, space and all.
    std::fs::write(
        &kernel,
        format!("_Static_assert(sizeof(MSG) == 4, \"MSG is the string a b\");\n{dot_c}"),
    )
    .unwrap();
    let mut args = vec![
        "run".to_string(),
        repo().join("specs/dot.spec").display().to_string(),
        "--impl".into(),
        kernel.display().to_string(),
        "-D".into(),
        "NS=64".into(),
        "--cost-only".into(),
        "--cflags".into(),
        "-O2 -DMSG='\"a b\"'".into(),
    ];
    args.extend(cheap_timing().map(String::from));
    let o = tdg(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).trim().parse::<f64>().is_ok(), "{}", stdout(&o));

    // An unclosed quote is the command line's mistake, said before any build.
    let o = tdg(&["run", "x.spec", "--cflags", "-DX='a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unclosed quote"), "{}", stderr(&o));
}
