//! Code placement: the routine starts at a chosen offset from a page,
//! whatever the size of the driver's own code and whatever precedes the
//! routine in its file.

mod driver_support;
use driver_gen::{RunError, CODE_PAGE};
use driver_support::*;
use spec_lang::ast::CodeOffset;

/// The routine after a helper of its own file, so it does not start its
/// object's code: placing the object would not place the routine.
const DOT_AFTER_A_HELPER: &str = r#"
__attribute__((noinline)) double scale_sum(const double *x, int n, double f)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += f * x[i];
    return s;
}

double ddot(const int N, const double *X, const double *Y)
{
    double s = 0.0;
    for (int i = 0; i < N; i++)
        s += X[i] * Y[i];
    return s + scale_sum(X, N < 0 ? 1 : 0, 0.0);
}
"#;

/// A reference body to verify against and operands in two cache states: a
/// driver with more code of its own before the implementation.
const WIDER_SPEC: &str = r#"
routine=double ddot(const int N, const double* X, const double* Y) {
  double s = 0.0;
  for (int i = 0; i < N; i++)
    s += X[i] * Y[i];
  return s;
};
init={
  N=Macro(NS, 4096);
  X=Vector(double, RANDOM, flush|align(64), N);
  Y=Vector(double, RANDOM, warm|align(32), N);
};
returns(ddot);
flop="2*N";
"#;

fn address_of(kit: &Kit, symbol: &str) -> u64 {
    toolchain::symbol_address(&kit.built.exe, symbol)
        .unwrap()
        .unwrap_or_else(|| panic!("no `{symbol}` in the driver"))
}

fn page_offset_of(kit: &Kit, symbol: &str) -> u64 {
    address_of(kit, symbol) % u64::from(CODE_PAGE)
}

#[test]
fn the_routine_starts_at_the_chosen_page_offset_whatever_the_driver_and_its_file() {
    let _shared = testkit::shared();
    let small = DOT_SPEC.replace("Macro(NS, 16384)", "Macro(NS, 1024)");
    for offset in [0u32, 48, 2064] {
        let mut o = opts();
        o.timing.code_offset = CodeOffset::new(offset.into());
        let mut sizes = Vec::new();
        for (name, spec) in [("dot", small.as_str()), ("wider", WIDER_SPEC)] {
            let kit = build(spec, DOT_AFTER_A_HELPER, &o);
            sizes.push(std::fs::metadata(&kit.built.exe).unwrap().len());
            assert_eq!(
                page_offset_of(&kit, "ddot"),
                u64::from(offset),
                "{name} spec, offset {offset}: the linked ddot"
            );
            let r = kit.run(&o);
            assert_eq!(
                r.code_page_offset,
                Some(offset),
                "{name} spec, offset {offset}: the driver's own report"
            );
            // The helper comes first in the driver, so placing the start of
            // the object would not have placed the routine.
            assert!(
                address_of(&kit, "scale_sum") < address_of(&kit, "ddot"),
                "{name} spec: the helper does not precede ddot"
            );
        }
        assert_ne!(sizes[0], sizes[1], "the two drivers must differ in size");
    }
}

#[test]
fn an_offset_the_routine_alignment_forbids_is_refused_not_rounded() {
    let _shared = testkit::shared();
    let mut o = opts();
    o.timing.code_offset = CodeOffset::new(8); // gcc and clang align functions to 16 at -O2
    match try_build(DOT_SPEC, DOT_AFTER_A_HELPER, &o) {
        Err(RunError::Placement(why)) => {
            assert!(why.contains("page offset 8"), "{why}");
            assert!(why.contains("landed at 16"), "{why}");
        }
        Err(e) => panic!("expected a placement error, got: {e}"),
        Ok(k) => panic!(
            "built with ddot at page offset {}",
            page_offset_of(&k, "ddot")
        ),
    }
    // An offset outside a page cannot be asked for: the type refuses it.
    assert_eq!(CodeOffset::new(CODE_PAGE.into()), None);
}

#[test]
fn a_generated_makefile_places_the_implementation_code_too() {
    let _shared = testkit::shared();
    if !have("make") {
        eprintln!("skipped: no make");
        return;
    }
    let spec = spec(DOT_SPEC);
    let model = driver_gen::DriverModel::from_checked(&spec, &opts().driver_config()).unwrap();
    let generated = driver_gen::render(&model, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    generated.write_to(dir.path()).unwrap();
    let impl_c = repo().join("specs/dot.c");
    for offset in [0u32, 80] {
        let out = std::process::Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(dir.path())
            .arg(format!("IMPL={}", impl_c.display()))
            .arg("DEFS=-DNS=1024")
            .arg(format!("CODE_OFFSET={offset}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "make: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // specs/dot.c holds ddot alone, so its code starts the object's.
        let at = toolchain::symbol_address(&dir.path().join("driver"), "ddot")
            .unwrap()
            .unwrap();
        assert_eq!(at % u64::from(CODE_PAGE), u64::from(offset));
        let json = std::process::Command::new(dir.path().join("driver"))
            .args(["--json", "--samples=3"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v["code_page_offset"], offset);
    }
}

/// A tuned macro (U, the implementation's alone) and a header beside the
/// implementation that the cache must notice changing.
const DOT_UNROLLED: &str = r#"
#include "dot_scale.h"
double ddot(const int N, const double *X, const double *Y)
{
    double s[U] = {0};
    int i = 0;
    for (; i + U <= N; i += U)
        for (int u = 0; u < U; u++)
            s[u] += X[i + u] * Y[i + u];
    for (; i < N; i++)
        s[0] += X[i] * Y[i];
    double t = 0.0;
    for (int u = 0; u < U; u++)
        t += s[u];
    return DOT_SCALE * t;
}
"#;

#[test]
fn a_second_configuration_compiles_only_the_implementation_and_a_changed_input_misses() {
    let _shared = testkit::shared();
    if !have("cc") {
        eprintln!("SKIPPED: no cc (the counting compiler wraps it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cc = testkit::LoggedCompiler::new(dir.path());
    let impl_c = dir.path().join("dot.c");
    std::fs::write(&impl_c, DOT_UNROLLED).unwrap();
    let header = dir.path().join("dot_scale.h");
    std::fs::write(&header, "#define DOT_SCALE 1.0\n").unwrap();
    let spec = spec(DOT_SPEC);
    let config = |u: i64| {
        let mut o = opts();
        o.cc = Some(cc.program());
        o.build_cache = Some(dir.path().join("cache"));
        o.defines = vec![("NS".into(), "4096".into()), ("U".into(), u.to_string())];
        o.timing.samples = Some(3);
        o
    };
    let build = |o: &driver_gen::RunOptions| driver_gen::build_driver(&spec, &impl_c, o).unwrap();
    let compiles_of = |lines: &[String], name: &str| {
        lines
            .iter()
            .filter(|l| l.contains(" -c ") && l.contains(name))
            .count()
    };

    let first = build(&config(1));
    let lines = cc.take();
    for source in ["driver.c", "tdg_runtime.c", "tdg_code_place.S", "dot.c"] {
        assert_eq!(compiles_of(&lines, source), 1, "{source}: {lines:#?}");
    }
    assert_eq!(first.build.compiled, 4, "{:?}", first.build);

    // The next configuration: the implementation compiles, the driver, its
    // runtime and the padding come from the cache, one link, no
    // `--version` (the compiler was asked once in this process).
    let second = build(&config(2));
    let lines = cc.take();
    assert_eq!(compiles_of(&lines, "dot.c"), 1, "{lines:#?}");
    assert_eq!(
        lines.iter().filter(|l| l.contains(" -c ")).count(),
        1,
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("--version")), "{lines:#?}");
    assert_eq!(second.build.links, 1, "{:?}", second.build);
    assert_eq!(lines.len(), 2, "one compile and one link: {lines:#?}");
    assert_eq!((second.build.compiled, second.build.reused), (1, 3));
    // Objects from the cache make a driver that runs and verifies.
    let report = second.run(&config(2)).unwrap();
    assert_eq!(report.verification.status, "skipped");
    assert!(report.reported_ns > 0.0);

    // The same configuration again: nothing compiles.
    let again = build(&config(2));
    assert_eq!((again.build.compiled, again.build.reused), (0, 4));
    let _ = cc.take();

    // A header the implementation includes changed: it compiles again.
    std::fs::write(&header, "#define DOT_SCALE 2.0\n").unwrap();
    let changed = build(&config(2));
    let lines = cc.take();
    assert_eq!(compiles_of(&lines, "dot.c"), 1, "{lines:#?}");
    assert_eq!((changed.build.compiled, changed.build.reused), (1, 3));

    // Other implementation flags: it compiles again, the driver does not.
    let mut o = config(2);
    o.cflags = vec!["-O1".into()];
    let reflagged = build(&o);
    assert_eq!((reflagged.build.compiled, reflagged.build.reused), (1, 3));

    // Another timing plan changes the driver's source: it compiles again,
    // the runtime, which does not depend on the spec, is reused.
    let mut o = config(2);
    o.timing.samples = Some(9);
    let _ = cc.take();
    let replanned = build(&o);
    let lines = cc.take();
    assert_eq!(compiles_of(&lines, "driver.c"), 1, "{lines:#?}");
    assert_eq!(compiles_of(&lines, "tdg_runtime.c"), 0, "{lines:#?}");
    assert_eq!(replanned.build.compiled, 1, "{:?}", replanned.build);

    // Another context (a spec macro's value) with the implementation in
    // another directory (a new include path): the driver and the
    // implementation compile again, the runtime, which reads neither, not.
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join("dot.c");
    std::fs::copy(&impl_c, &moved).unwrap();
    std::fs::copy(&header, elsewhere.path().join("dot_scale.h")).unwrap();
    let mut o = config(2);
    o.defines[0].1 = "2048".into();
    let recontexted = driver_gen::build_driver(&spec, &moved, &o).unwrap();
    let lines = cc.take();
    assert_eq!(compiles_of(&lines, "driver.c"), 1, "{lines:#?}");
    assert_eq!(compiles_of(&lines, "dot.c"), 1, "{lines:#?}");
    assert_eq!(compiles_of(&lines, "tdg_runtime.c"), 0, "{lines:#?}");
    assert_eq!(recontexted.build.compiled, 2, "{:?}", recontexted.build);
}
