//! Every spec in specs/ is generated, compiled warning-free (gcc and clang,
//! -Wall -Wextra -Werror), run against its kernel in specs/*.c and verified.

use crate::driver_support::*;
use crate::support::tdg_command;
use driver_gen::{machine_defaults, render, run_driver, DriverConfig, DriverModel};
use std::path::PathBuf;
use std::process::Command;
use toolchain::{CCompiler, CompileJob};

fn all_specs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "spec"))
        .collect();
    v.sort();
    assert!(v.len() >= 5, "expected the example specs, found {v:?}");
    v
}

#[test]
fn every_spec_runs_and_verifies_against_its_kernel() {
    let _heavy = testkit::shared();
    for path in all_specs() {
        let spec = spec_lang::load(&path, &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|d| panic!("{d}"));
        let imp = path.with_extension("c");
        assert!(
            imp.exists(),
            "{} has no kernel {}",
            path.display(),
            imp.display()
        );
        let mut o = opts();
        o.timing.samples = Some(3);
        // An OpenMP kernel is built as OpenMP; the driver follows its flags.
        if std::fs::read_to_string(&imp)
            .unwrap()
            .contains("#pragma omp")
        {
            o.cflags.push("-fopenmp".into());
        }
        let r = run_driver(&spec, &imp, &o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if spec
            .timer
            .as_ref()
            .and_then(|t| t.threads)
            .is_some_and(|n| n > 1)
            && testkit::usable_cpus().len() >= 2
        {
            // The team was formed and pinned. How many of its threads were
            // measured busy depends on the other CPU being free, which a
            // test sharing the machine cannot promise (driver_threads.rs
            // asserts it alone).
            assert_eq!(
                (r.team.omp_team, r.team.thread_cpus.len()),
                (2, 2),
                "{}: {:?}",
                path.display(),
                r.team
            );
        }
        eprintln!(
            "{}: {:.0} ns/call, {} x{}, verification {}",
            path.display(),
            r.reported_ns,
            r.mode,
            r.reps_per_sample,
            r.verification.status
        );
        assert!(r.reported_ns > 0.0);
        assert_eq!(r.samples_ns.len(), 3);
        let has_body = spec.routine.body.is_some();
        let expected = if has_body { "passed" } else { "skipped" };
        assert_eq!(r.verification.status, expected, "{}", path.display());
        assert!(r.mflops_best.is_some(), "{}: flop formula", path.display());
    }
}

const EXTRA_SPECS: &[(&str, &str)] = &[
    (
        "storage",
        r#"
routine=void fills(const int n, double** A, const double* S, const int* Q,
                   const unsigned char* F, const double* R, double* out);
init={
  n=Macro(NN, 16);
  A=Array2D(double, n, 8, CONST(1.5), align(32));
  S=SVector(double, CONST(2.5), _, n);
  Q=Vector(int, SEQ, _, n);
  F=Vector(unsigned char, FILE("f.bin"), _, 32);
  R=Vector(double, RANDOM(3, 4), _, n);
  out=SMatrix(double, 2, n, ZERO, _);
};
"#,
    ),
    (
        "complex-return",
        r#"
routine=float _Complex cdot(const int n, const float _Complex* x, const int k, const float r) {
  float _Complex s = 0; for (int i = 0; i < n; i++) s += x[i] * (float)k * r; return s;
};
init={ n=100; k=Range(1,2); r=RANDOM; x=Vector(float _Complex, RANDOM, flush, n); };
returns(cdot);
"#,
    ),
    (
        "su3-structs",
        r#"
include="typedef struct { double _Complex e[3][3]; } su3_matrix;";
include="typedef struct { double _Complex c[3]; } su3_vector;";
routine=void mult_su3_mat_vec(const int n, const su3_matrix* a, const su3_vector* b, su3_vector* c) {
  for (int s = 0; s < n; s++)
    for (int i = 0; i < 3; i++)
      c[s].c[i] = a[s].e[i][0] * b[s].c[0] + a[s].e[i][1] * b[s].c[1] + a[s].e[i][2] * b[s].c[2];
};
init={ n=500; a=Vector(su3_matrix, RANDOM, flush, n); b=Vector(su3_vector, RANDOM, warm, n); c=Vector(su3_vector, ZERO, flush, n); };
returns(c);
"#,
    ),
    ("no-parameters", "routine=void f();\n"),
    (
        "return-only",
        "routine=int g() { return 42; };\nreturns(g);\n",
    ),
    (
        "fortran",
        r#"
lang=fortran;
routine=void DSCAL(const int N, const double alpha, double* X) {
  for (int i = 0; i < N; i++) X[i] *= alpha;
};
init={ N=1000; alpha=0.5; X=Vector(double, RANDOM, warm|align(8)|misalign(16), N); };
returns(X);
"#,
    ),
];

#[test]
fn generated_c_is_warning_free_under_gcc_and_clang() {
    let _heavy = testkit::shared();
    let mut compilers = vec!["gcc"];
    if have("clang") {
        compilers.push("clang");
    } else {
        eprintln!("clang not installed (scripts/setup.d/20-compilers.sh installs it): gcc only");
    }
    let mut specs: Vec<(String, spec_lang::CheckedSpec)> = all_specs()
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                spec_lang::load(&p, &[])
                    .and_then(|c| c.for_use(spec_lang::Use::Driver))
                    .unwrap(),
            )
        })
        .collect();
    // Features the examples do not use: every storage kind and fill, Range
    // and RANDOM scalars, a complex return value, Fortran conventions.
    for (name, src) in EXTRA_SPECS {
        specs.push((name.to_string(), spec(src)));
    }
    let compilers: Vec<CCompiler> = compilers
        .iter()
        .map(|cc| CCompiler::find(Some(cc)).unwrap())
        .collect();
    let compile = |dir: &std::path::Path, src: &str, cc: &CCompiler, extra: &[&str]| {
        cc.compile(&CompileJob {
            sources: vec![dir.join(src)],
            output: dir.join(format!("{src}.{}{}.o", cc.program, extra.concat())),
            cflags: ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect(),
            object_only: true,
            ..Default::default()
        })
    };
    // A parallel spec's driver is built with OpenMP too, as it is for an
    // OpenMP kernel (clang's runtime is libomp-dev, 20-compilers.sh).
    const SERIAL: &[&[&str]] = &[&[]];
    const PARALLEL: &[&[&str]] = &[&[], &["-fopenmp"]];
    let drivers: Vec<(String, tempfile::TempDir, String, &[&[&str]])> = specs
        .into_iter()
        .map(|(path, spec)| {
            let model =
                DriverModel::from_checked(&spec, &DriverConfig::new(machine_defaults())).unwrap();
            let dir = tempfile::tempdir().unwrap();
            let driver = render(&model, None).unwrap();
            driver.write_to(dir.path()).unwrap();
            let runtime = driver.file("tdg_runtime.c").unwrap().to_string();
            let flags = if model.timing.threads.value > 1 {
                PARALLEL
            } else {
                SERIAL
            };
            (path, dir, runtime, flags)
        })
        .collect();
    assert!(
        drivers.iter().any(|d| d.3.len() > 1),
        "a parallel example spec (specs/omp_*.spec) is built with OpenMP"
    );
    // The runtime is copied into every driver as it is: compiled once per
    // compiler, after checking that every driver got the same text.
    let (_, first_dir, runtime, _) = &drivers[0];
    for (path, _, other, _) in &drivers {
        assert_eq!(other, runtime, "{path} has another tdg_runtime.c");
    }
    // Two compiles at a time: this machine's two cores.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let jobs: Vec<(&std::path::Path, &str, &CCompiler, &str, &[&str])> = compilers
        .iter()
        .flat_map(|cc| {
            PARALLEL.iter().map(move |extra| {
                (
                    first_dir.path(),
                    "tdg_runtime.c",
                    cc,
                    "every driver",
                    *extra,
                )
            })
        })
        .chain(drivers.iter().flat_map(|(path, dir, _, flags)| {
            compilers.iter().flat_map(move |cc| {
                flags
                    .iter()
                    .map(move |extra| (dir.path(), "driver.c", cc, path.as_str(), *extra))
            })
        }))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(dir, src, cc, what, extra)) = jobs.get(i) else {
                    return;
                };
                compile(dir, src, cc, extra)
                    .unwrap_or_else(|e| panic!("{what} {src} with {} {extra:?}: {e}", cc.program));
            });
        }
    });
}

/// The kernels beside the specs are what `tdg tune` compiles hundreds of
/// times with other macros: each must be clean C on its own, not only
/// through the driver (which builds it with the user's flags, no warnings).
#[test]
fn every_bundled_kernel_compiles_warning_free_under_gcc_and_clang() {
    let _heavy = testkit::shared();
    let mut compilers = vec!["gcc"];
    if have("clang") {
        compilers.push("clang");
    } else {
        eprintln!("clang not installed (scripts/setup.d/20-compilers.sh installs it): gcc only");
    }
    let dir = tempfile::tempdir().unwrap();
    let kernels: Vec<PathBuf> = all_specs()
        .iter()
        .map(|s| s.with_extension("c"))
        .filter(|k| k.exists())
        .collect();
    assert!(
        kernels.len() >= 5,
        "expected the kernels beside the specs: {kernels:?}"
    );
    for cc in &compilers {
        let cc = CCompiler::find(Some(cc)).unwrap();
        for kernel in &kernels {
            let mut cflags: Vec<String> = [
                "-std=c99",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if std::fs::read_to_string(kernel)
                .unwrap()
                .contains("#pragma omp")
            {
                cflags.push("-fopenmp".into());
            }
            let stem = kernel.file_stem().unwrap().to_string_lossy();
            cc.compile(&CompileJob {
                sources: vec![kernel.clone()],
                output: dir.path().join(format!("{stem}.{}.o", cc.program)),
                cflags,
                object_only: true,
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{} with {}: {e}", kernel.display(), cc.program));
        }
    }
}

#[test]
fn tdg_gen_writes_a_driver_that_builds_and_runs_without_tdg() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = tdg_command()
        .args(["gen", "specs/axpy.spec", "-o"])
        .arg(dir.path())
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "driver.c",
        "tdg_runtime.c",
        "tdg_runtime.h",
        "tdg_timing.h",
        "Makefile",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    let make = Command::new("make")
        .arg("-s")
        .arg(format!("IMPL={}", repo().join("specs/axpy.c").display()))
        .arg("DEFS=-DNS=5000")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        make.status.success(),
        "{}",
        String::from_utf8_lossy(&make.stderr)
    );
    let run = Command::new(dir.path().join("driver"))
        .args(["--samples=3", "--json"])
        .output()
        .unwrap();
    assert!(run.status.success());
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["verification"]["status"], "passed");
    // -DNS=5000 resized it without regenerating: 2 operands x 5000 doubles.
    assert_eq!(v["operands"][0]["bytes"], 40000);
}

#[test]
fn templates_dir_overrides_the_built_in_templates() {
    let tdir = tempfile::tempdir().unwrap();
    let original = std::fs::read_to_string(repo().join("templates/driver.c.hbs")).unwrap();
    std::fs::write(
        tdir.path().join("driver.c.hbs"),
        format!("/* site-local driver layout */\n{original}"),
    )
    .unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let out = tdg_command()
        .args(["gen", "specs/dot.spec", "--templates"])
        .arg(tdir.path())
        .arg("-o")
        .arg(out_dir.path())
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = std::fs::read_to_string(out_dir.path().join("driver.c")).unwrap();
    assert!(c.starts_with("/* site-local driver layout */"));
    // Untouched templates still come from the binary.
    assert!(out_dir.path().join("tdg_runtime.c").exists());
}

#[test]
fn explain_states_sizes_alignment_and_cache_state_from_the_model() {
    let explain = |extra: &[&str]| {
        let out = tdg_command()
            .args(["explain", "specs/dot.spec", "-D", "NS=1000"])
            .args(extra)
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let text = explain(&["--flush-kb", "512"]);
    assert!(text.contains("8000 bytes"), "{text}");
    assert!(text.contains("aligned to 64 bytes"), "{text}");
    assert!(text.contains("512 KiB"), "{text}");
    assert!(text.contains("out of cache"), "{text}");
    // A chosen size is read as chosen; the full flush also clflushes.
    assert!(!text.contains("clflush"), "{text}");
    // The full flush clflushes the operands, then evicts what the private
    // caches and the TLB hold, and says what that reads per sample.
    let text = explain(&[]);
    assert!(text.contains("its lines are clflush'ed, then a"), "{text}");
    assert!(text.contains("pages are touched"), "{text}");
    assert!(
        text.contains("per sample whatever the last-level cache holds"),
        "{text}"
    );
}

#[test]
fn run_prints_table_json_and_csv() {
    let _heavy = testkit::shared();
    let base = [
        "run",
        "specs/dot.spec",
        "--impl",
        "specs/dot.c",
        "-D",
        "NS=2000",
        "--samples",
        "3",
    ];
    let run = |extra: &[&str]| {
        let out = tdg_command()
            .args(base)
            .args(extra)
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // A flush size on the command line is built into the driver and the
    // report says where it came from (driver-gen's tests show it is not
    // sent to the driver again); left out, it is the machine's.
    let table = run(&["--flush-kb", "384"]);
    assert!(
        table.contains("reported") && table.contains("MFLOPS"),
        "{table}"
    );
    assert!(
        table.contains("read 384 KiB (command line; read by default)"),
        "{table}"
    );
    assert!(table.contains("timer        cycle (default; "), "{table}");
    let json: driver_gen::RunReport = serde_json::from_str(&run(&["--json"])).unwrap();
    assert_eq!(json.samples_ns.len(), 3);
    let sources = json.sources.expect("tdg run records each setting's source");
    use driver_gen::model::Source;
    assert_eq!(
        (
            sources.flush_kib.source,
            sources.samples.source,
            sources.timer.source
        ),
        (Source::Machine, Source::CommandLine, Source::Default)
    );
    assert!(json.stats.min <= json.stats.median && json.stats.median <= json.stats.max);
    let csv = run(&["--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("routine,"));
    let sweep = run(&["--flush-kb", "0,1024"]);
    assert!(sweep.contains("flush KiB"), "{sweep}");
}
