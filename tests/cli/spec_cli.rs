//! `tdg check` and `tdg fmt` end to end: exit codes, rendered diagnostics,
//! files rewritten (or not).

use crate::support::{tdg, tdg_command};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn spec_path(name: &str) -> String {
    testkit::repo()
        .join("specs")
        .join(name)
        .display()
        .to_string()
}

/// Every spec in specs/, sorted.
fn bundled_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(testkit::repo().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "spec"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 5, "expected the example specs: {specs:?}");
    specs
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn check_accepts_every_bundled_spec() {
    let files: Vec<String> = bundled_specs()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let args: Vec<&str> = std::iter::once("check")
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = tdg(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), files.len(), "{stdout}");
    assert!(
        stdout.contains(
            "gemm.spec: ok for driver, profile, checkpoint (routine ATL_USERMM, 11 parameters, 3 arrays"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("751680 flop per call"),
        "2*72^3 + 72^2 flops: {stdout}"
    );
}

#[test]
fn check_reports_every_bad_file_with_location_caret_and_hint() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.spec",
        "routine=void f(const int M, const int lda, double* A);\ninit={M=4; lda=M; A=Matrix(double, ldaa, M, RANDOM, _);};\n",
    );
    let bad2 = write(
        dir.path(),
        "bad2.spec",
        "routine=void g(const int N);\ninit={N=1;};\nflop=\"2*(N\";\n",
    );
    let out = tdg(&[
        "check",
        bad.to_str().unwrap(),
        &spec_path("dot.spec"),
        bad2.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let b = bad.display();
    assert!(
        err.contains(&format!(
            "{b}:2:36: error: undefined name `ldaa` in the size of `A`"
        )),
        "{err}"
    );
    assert!(
        err.contains(" 2 | init={M=4; lda=M; A=Matrix(double, ldaa, M, RANDOM, _);};"),
        "{err}"
    );
    assert!(
        err.contains("   |                                    ^^^^"),
        "{err}"
    );
    assert!(err.contains("= hint: did you mean `lda`?"), "{err}");
    assert!(
        err.contains(&format!(
            "{}:3:11: error: flop formula does not parse",
            bad2.display()
        )),
        "{err}"
    );
    assert!(err.contains("2 of 3 spec files failed"), "{err}");
    // The good file in the middle is still checked and reported.
    assert!(text(&out.stdout).contains("dot.spec: ok"));
}

#[test]
fn check_with_defines_evaluates_sizes() {
    let gemm = spec_path("gemm.spec");
    let out = tdg(&[
        "check", &gemm, "-D", "MS=1000", "-D", "NS=1000", "-D", "KS=1000",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // 3 matrices of 1000x1000 doubles.
    assert!(
        text(&out.stdout).contains("22.9 MiB"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("2001000000 flop per call"));

    let out = tdg(&["check", &gemm, "-D", "MS=0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("gemm.spec:9:20: error: `A`: size is 0; it must be at least 1"),
        "{err}"
    );
    assert!(err.contains("hint: with -D MS=0"), "{err}");

    let out = tdg(&["check", &gemm, "-D", "MZ=3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("`-D MZ=...` names no macro or scalar of this spec"));

    // An override is range-checked against its parameter's C type too.
    let dot = spec_path("dot.spec");
    let src = std::fs::read_to_string(&dot).unwrap();
    assert!(src.contains("const int N"), "dot.spec has an int N:\n{src}");
    let out = tdg(&["check", &dot, "-D", "N=3000000000"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: `N` is a `const int`: 3000000000 does not fit")
            && err.contains("(with -D N=3000000000)"),
        "{err}"
    );

    let out = tdg(&["check", &gemm, "-D", "MS"]);
    assert_eq!(out.status.code(), Some(2), "clap rejects a malformed -D");
    assert!(text(&out.stderr).contains("NAME=VALUE"));
}

#[test]
fn check_missing_file_is_one_clear_line() {
    let out = tdg(&["check", "/nonexistent/x.spec"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "the error and the summary only:\n{err}");
    assert!(
        lines[0].starts_with("/nonexistent/x.spec: error: cannot read spec: No such file"),
        "{err}"
    );
    assert!(lines[0].contains("check the path"), "{err}");
    assert_eq!(lines[1], "tdg check: 1 of 1 spec file failed");
}

/// A directory, a non-UTF-8 file and a good file in one call: each bad one is
/// one clear line (the encoding error located like any other), nothing
/// panics, and the good file is still checked.
#[test]
fn check_and_fmt_report_directories_and_non_utf8_files_and_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("specs.d");
    std::fs::create_dir(&sub).unwrap();
    let latin1 = dir.path().join("latin1.spec");
    // `é` in Latin-1 inside a comment on line 2.
    std::fs::write(
        &latin1,
        b"routine=void f(const int N);\n// caf\xe9\ninit={N=1;};\n",
    )
    .unwrap();
    let good = write(
        dir.path(),
        "good.spec",
        "routine=void f(const int N);\ninit={N = 1;};\n",
    );
    let (sub_s, latin1_s, good_s) = (
        sub.to_str().unwrap(),
        latin1.to_str().unwrap(),
        good.to_str().unwrap(),
    );

    let out = tdg(&["check", sub_s, latin1_s, good_s]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.lines().any(|l| l
            == format!(
                "{sub_s}: error: cannot read spec: it is a directory; name the spec files in it, e.g. `{sub_s}/*.spec`"
            )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{latin1_s}:2:7: error: not UTF-8 text: byte 0xe9 cannot start a character here"
        )),
        "{err}"
    );
    assert!(err.contains("save the file as UTF-8"), "{err}");
    assert!(err.contains("2 of 3 spec files failed"), "{err}");
    assert!(text(&out.stdout).contains("good.spec: ok"));

    // fmt goes on past the bad files too and still rewrites the good one.
    let out = tdg(&["fmt", sub_s, latin1_s, good_s]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("it is a directory"), "{err}");
    assert!(
        err.contains(&format!("{latin1_s}:2:7: error: not UTF-8 text")),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&good).unwrap(),
        "routine=void f(const int N);\ninit={\n  N=1;\n};\n"
    );
    assert_eq!(
        std::fs::read(&latin1).unwrap().last(),
        Some(&b'\n'),
        "the bad file is left alone"
    );
}

/// `tdg fmt` through a symlink rewrites the file it points to and keeps the link.
#[test]
fn fmt_through_a_symlink_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = write(
        dir.path(),
        "real.spec",
        "routine=void f(const int N);\ninit={N = 1;};\n",
    );
    let link = dir.path().join("link.spec");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = tdg(&["fmt", link.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "routine=void f(const int N);\ninit={\n  N=1;\n};\n"
    );
}

#[test]
fn fmt_rewrites_in_place_keeps_comments_and_then_check_passes() {
    let dir = tempfile::tempdir().unwrap();
    let messy = "// axpy\nroutine = void daxpy( const int N , const double a, const double *X, double *Y ) ;\n\
                 init = { N = Macro(NS,100) ; a=2; // scale\n X = Vector(double,RANDOM, ,N); Y=Vector(double,ZERO,flush|align(64),N);};\n";
    let p = write(dir.path(), "a.spec", messy);
    let ps = p.to_str().unwrap();

    let out = tdg(&["fmt", "--check", ps]);
    assert_eq!(out.status.code(), Some(8));
    assert!(
        text(&out.stderr).contains("a.spec:2: not in canonical layout"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        messy,
        "--check must not write"
    );

    let out = tdg(&["fmt", ps]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let formatted = std::fs::read_to_string(&p).unwrap();
    assert_eq!(
        formatted,
        "// axpy\nroutine=void daxpy(const int N, const double a, const double* X, double* Y);\n\
         init={\n  N=Macro(NS, 100);\n  a=2; // scale\n  X=Vector(double, RANDOM, _, N);\n  Y=Vector(double, ZERO, flush|align(64), N);\n};\n"
    );
    let out = tdg(&["fmt", "--check", ps]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = tdg(&["check", ps]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn fmt_output_of_bundled_specs_is_a_fixed_point() {
    for path in &bundled_specs() {
        let n = path.display();
        let out = tdg(&["fmt".as_ref(), "--stdout".as_ref(), path.as_os_str()]);
        assert!(out.status.success(), "{n}: {}", text(&out.stderr));
        let again = spec_lang::format_source(&text(&out.stdout), "x").unwrap();
        assert_eq!(
            again,
            text(&out.stdout),
            "{n}: fmt output is not a fixed point"
        );
    }
}

#[test]
fn fmt_refuses_a_spec_that_does_not_parse_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let src = "routine=void f(const int N)\ninit={N=1;};\n";
    let p = write(dir.path(), "b.spec", src);
    let out = tdg(&["fmt", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("b.spec:1:28: error: expected `;`"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), src);
}

#[test]
fn help_exists_for_check_and_fmt() {
    for cmd in ["check", "fmt"] {
        let out = tdg(&[cmd, "--help"]);
        assert!(out.status.success());
        assert!(text(&out.stdout).contains("Usage: tdg"), "{cmd}");
    }
}

#[test]
fn check_json_gives_one_document_with_every_file_and_positions() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.spec", "routine=void f(const int N, double* X);\ninit={N=1; X=Vector(double, RANDOM, flush|warm, NN);};\n");
    let out = tdg(&[
        "check",
        "--format",
        "json",
        &spec_path("axpy.spec"),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["version"], formats::JSON_VERSION);
    assert_eq!(doc["ok"], false);
    let lines = doc["files"].as_array().unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["ok"], true);
    assert!(lines[0]["summary"]
        .as_str()
        .unwrap()
        .contains("routine daxpy"));
    assert_eq!(lines[1]["ok"], false);
    let d = lines[1]["diagnostics"].as_array().unwrap();
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(
        d[0]["message"],
        "`flush` and `warm` conflict: an operand cannot be both evicted and cache-resident"
    );
    assert_eq!(
        (d[0]["line"].as_u64(), d[0]["col"].as_u64()),
        (Some(2), Some(43))
    );
    assert_eq!(d[1]["message"], "undefined name `NN` in the size of `X`");
    assert_eq!(d[1]["hint"], "did you mean `N`?");
    assert_eq!(d[1]["span"]["start"].as_u64(), Some(88));
}

/// A spec as the reference generator writes it: no `flush` on its
/// operands, a number as a fill, a scalar without init, a body.
const REFERENCE_STYLE_DOT: &str = r#"routine=double ddot(const int N, const double* X, const double* Y, const double scale) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    s += X[i] * Y[i];
  return s * scale;
};
init={
  N=Macro(NS, 4096);
  X=Vector(double, RANDOM, align(64), N);
  Y=Vector(double, 0.5, align(64), N);
};
flop="2*N";
"#;

/// `tdg` with a private cache and no machine probe (sysfs defaults).
fn tdg_in(cache: &Path, args: &[&str]) -> Output {
    tdg_command()
        .args(args)
        .env("TDG_CACHE_DIR", cache)
        .env("TDG_NO_PROBE", "1")
        .output()
        .expect("run tdg")
}

#[test]
fn reference_generator_spec_is_accepted_warned_and_explained() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "dot.spec", REFERENCE_STYLE_DOT);
    let spec = spec.to_str().unwrap();
    let out = tdg_in(dir.path(), &["check", spec]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "dot.spec:1:81: warning: scalar parameter `scale` has no init: the driver passes 1"
        ),
        "{err}"
    );
    let out = tdg_in(dir.path(), &["check", "--format", "json", spec]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let v = &doc["files"][0];
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["diagnostics"][0]["severity"], "warning", "{v}");
    assert_eq!(
        (
            v["diagnostics"][0]["line"].as_u64(),
            v["diagnostics"][0]["col"].as_u64()
        ),
        (Some(1), Some(81))
    );
    let out = tdg_in(dir.path(), &["explain", spec]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let explained = text(&out.stdout);
    assert!(
        explained.contains("scale (double) = 1: fixed for every call")
            && explained.contains("no init in the spec: set to 1"),
        "{explained}"
    );
    assert!(explained.contains("fill: every element 0.5"), "{explained}");
    assert!(
        explained.contains("not flushed (no `flush` attribute)")
            && explained.contains("flush: none before the calls"),
        "{explained}"
    );
    // `--flush read` on the command line asks for the cold context.
    let out = tdg_in(dir.path(), &["explain", spec, "--flush", "read"]);
    let explained = text(&out.stdout);
    assert!(explained.contains("out of cache"), "{explained}");
}

/// Reported ns of `tdg run SPEC ARGS --json` (the body is the implementation).
/// The driver's own adaptive sampling (at least 100 ms): 15 fixed samples of
/// a few microseconds each would read whichever state this shared host was
/// in for a fraction of a millisecond, and the ratios compared below would
/// follow the host, not the flush.
fn run_json(cache: &Path, spec: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["run", spec, "--json", "--min-interval-ns", "0"];
    args.extend_from_slice(extra);
    let out = tdg_in(cache, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn reported_ns(cache: &Path, spec: &str, extra: &[&str]) -> f64 {
    run_json(cache, spec, extra)["reported_ns"]
        .as_f64()
        .expect("reported_ns")
}

#[test]
fn the_body_is_the_implementation_and_an_unmarked_operand_is_not_flushed() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "dot.spec", REFERENCE_STYLE_DOT);
    let spec = spec.to_str().unwrap();
    // Body as implementation: runs without --impl and says so.
    let out = tdg_in(dir.path(), &["run", spec, "--samples", "3"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("timing the body of `ddot`")
            && err.contains("dot.spec:1:81: warning: scalar parameter `scale` has no init"),
        "{err}"
    );
    // A spec without a body still needs --impl, said in one line.
    let nobody = write(
        dir.path(),
        "nobody.spec",
        "routine=void f(const int N, double* X);\ninit={ N=8; X=Vector(double, ZERO, _, N); };\n",
    );
    let out = tdg_in(dir.path(), &["run", nobody.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--impl FILE is required"),
        "{}",
        text(&out.stderr)
    );

    // One call per sample, 2 x 32 KiB of operands (in L2, not in L1): the
    // unmarked operands are timed as with --flush none (the driver flushes
    // nothing and says no operand was flushed), and the flushed time is
    // above it (interleaved rounds, the minimum of each: noise only adds).
    // How near the unmarked time is to --flush none's is a benchmark
    // (scripts/bench-driver's warm case), not a band a test can hold.
    let unmarked_run = run_json(dir.path(), spec, &[]);
    assert_eq!(unmarked_run["flush"], "none", "{unmarked_run}");
    let caches: Vec<&str> = unmarked_run["operands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["cache"].as_str().unwrap())
        .collect();
    assert!(caches.iter().all(|c| *c == "unflushed"), "{caches:?}");
    let (mut unmarked, mut flushed) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        unmarked = unmarked.min(reported_ns(dir.path(), spec, &[]));
        flushed = flushed.min(reported_ns(dir.path(), spec, &["--flush", "read"]));
    }
    eprintln!("unmarked {unmarked:.0} ns, --flush read {flushed:.0} ns");
    assert!(
        flushed > unmarked,
        "flushed {flushed:.0} ns vs unmarked {unmarked:.0} ns"
    );
}

/// A spec's body is written to a new scratch directory on every run; the
/// driver, its runtime and the body itself still come from the build cache
/// the next time, as they do for an `--impl` file: the second run compiles
/// nothing and only links.
#[test]
fn a_body_specs_second_run_compiles_nothing() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let spec = write(dir.path(), "dot.spec", REFERENCE_STYLE_DOT);
    let log = dir.path().join("cc.log");
    let cc = write(
        dir.path(),
        "logged-cc",
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec cc \"$@\"\n",
            log.display()
        ),
    );
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let compiles = |name: &str| {
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        let n = lines
            .lines()
            .filter(|l| l.contains(" -c ") && l.contains(name))
            .count();
        (n, lines)
    };
    let args = [
        "run",
        spec.to_str().unwrap(),
        "--cc",
        cc.to_str().unwrap(),
        "--samples",
        "3",
    ];
    let first = tdg_in(dir.path(), &args);
    assert!(first.status.success(), "{}", text(&first.stderr));
    for source in ["driver.c", "tdg_runtime.c", "ddot.c"] {
        let (n, lines) = compiles(source);
        assert_eq!(n, 1, "{source}: {lines}");
    }
    std::fs::remove_file(&log).unwrap();
    let second = tdg_in(dir.path(), &args);
    assert!(second.status.success(), "{}", text(&second.stderr));
    let (n, lines) = compiles("");
    assert_eq!(n, 0, "the second run compiled again: {lines}");
    // Besides the compiler's identity (`cc --version`, once per process).
    let invocations: Vec<&str> = lines.lines().filter(|l| *l != "--version").collect();
    assert!(
        invocations.len() == 1 && invocations[0].contains("tdg_runtime.c.o"),
        "one link: {lines}"
    );
}

/// The sampling budget a spec writes in `timer={...}` is what `explain`
/// describes, with where it came from; a command line that makes it end
/// before it starts is a usage error (exit 2) naming both ends.
#[test]
fn sampling_budget_from_the_spec_is_explained_and_a_contradiction_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let dot = std::fs::read_to_string(spec_path("dot.spec")).unwrap();
    let spec = write(
        dir.path(),
        "dot.spec",
        &format!("{dot}\ntimer={{ max_time=2s; stable=1%; }};\n"),
    );
    let spec = spec.to_str().unwrap();
    let out = tdg_in(dir.path(), &["explain", spec]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let explained = text(&out.stdout);
    assert!(
        explained.contains("spread over at least 100 ms")
            && explained.contains("agree within 1%")
            && explained.contains(
                "at 2000 ms the figure is reported as unstable \
                 (min_time: default, max_time: spec timer={...}, stable: spec timer={...})"
            ),
        "{explained}"
    );
    let out = tdg_in(dir.path(), &["explain", spec, "--min-time-ms", "3000"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("the sampling budget ends (2000 ms, spec timer={...}) before it starts (3000 ms, command line)")
            && err.lines().count() == 1,
        "{err}"
    );
}

/// A library routine's prototype-only spec: opaque structs behind pointers,
/// an output without a count. A profile shim serves it; a driver (no
/// allocations) and a checkpoint region shim (no output count) do not.
const LIBRARY_PROTOTYPE: &str = "routine=int BZ2_bzCompressInit(bz_stream* strm, char* buf, int blockSize100k, int verbosity);\ninclude=\"typedef struct bz_stream bz_stream;\";\nreturns(buf);\n";

#[test]
fn check_says_per_use_whether_a_spec_serves_it_and_fails_only_for_uses_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let lib = write(dir.path(), "lib.spec", LIBRARY_PROTOTYPE);
    let lib = lib.to_str().unwrap();

    let out = tdg(&["check", lib]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with(&format!(
            "{lib}: ok for profile (routine BZ2_bzCompressInit, 4 parameters)"
        )),
        "{said}"
    );
    assert!(
        said.contains("  not for a driver: pointer parameter `strm` has no allocation (`tdg check --for driver")
            && said.contains("  not for a checkpoint: output `buf` has no count"),
        "{said}"
    );
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));

    // Asked for a driver: every pointer's missing allocation, located.
    let out = tdg(&["check", "--for", "driver", lib]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    for p in ["strm", "buf"] {
        assert!(
            err.contains(&format!("error: pointer parameter `{p}` has no allocation")),
            "{err}"
        );
    }
    assert!(
        !err.contains("has no count"),
        "a checkpoint error was not asked for: {err}"
    );
    assert!(
        text(&out.stdout).contains("FAILS for driver"),
        "{}",
        text(&out.stdout)
    );

    let out = tdg(&["check", "--for", "profile", lib]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = tdg(&["check", "--for", "profile,checkpoint", lib]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("lib.spec:3:9: error: output `buf` has no count"),
        "{err}"
    );
    assert!(!err.contains("has no allocation"), "{err}");

    let out = tdg(&["check", "--format", "json", lib]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let uses: Vec<(String, bool, bool)> = doc["files"][0]["uses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["use"].as_str().unwrap().to_string(),
                u["ok"].as_bool().unwrap(),
                u["asked"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        uses,
        [
            ("driver".into(), false, false),
            ("profile".into(), true, true),
            ("checkpoint".into(), false, false)
        ]
    );

    // What check says of the profile use is what the profile tools do: the
    // interposers build from this spec.
    let out = tdg(&[
        "instrument",
        lib,
        "-o",
        dir.path().join("shim").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A spec that serves no use fails by default, with every error once.
    let bad = write(dir.path(), "bad.spec", "routine=int f(Estate* s);\n");
    let out = tdg(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert_eq!(err.matches("unknown type `Estate`").count(), 1, "{err}");
}
