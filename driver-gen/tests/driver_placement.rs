//! Code placement: the routine starts at a chosen offset from a page,
//! whatever the size of the driver's own code and whatever precedes the
//! routine in its file.

mod driver_support;
use driver_gen::{RunError, CODE_PAGE};
use driver_support::*;

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
        o.timing.code_offset = Some(offset);
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
    o.timing.code_offset = Some(8); // gcc and clang align functions to 16 at -O2
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
    o.timing.code_offset = Some(CODE_PAGE);
    assert!(matches!(
        try_build(DOT_SPEC, DOT_AFTER_A_HELPER, &o),
        Err(RunError::Model(driver_gen::ModelError::CodeOffset(4096)))
    ));
}

#[test]
fn a_generated_makefile_places_the_implementation_code_too() {
    let _shared = testkit::shared();
    if !have("make") {
        eprintln!("skipped: no make");
        return;
    }
    let spec = spec(DOT_SPEC);
    let model = driver_gen::DriverModel::from_spec(&spec, &opts().driver_config()).unwrap();
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
