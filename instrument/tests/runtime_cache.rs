//! The profiling runtime is tdg's own source, the same on every build: a
//! second build with the build cache copies its object instead of
//! compiling it, and every interposer links that one object. The compiler
//! logs each call (testkit), so the test counts what really ran.

use instrument::{interpose, runtime};
use toolchain::{BuildCache, CCompiler};

#[test]
fn the_runtime_compiles_once_per_compiler_and_the_interposers_link_its_object() {
    let _beside = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let logged = testkit::LoggedCompiler::new(dir.path());
    let cc = CCompiler::find(Some(&logged.program())).unwrap();
    let cache = BuildCache::open(&dir.path().join("cache")).unwrap();
    let compiles_of_the_runtime = || {
        logged
            .calls()
            .iter()
            .filter(|l| l.contains(" -c ") && l.contains("tdg_instrument.c"))
            .count()
    };
    runtime::build(&cc, &dir.path().join("first"), Some(&cache)).unwrap();
    assert_eq!(compiles_of_the_runtime(), 1);
    let spec = spec_lang::check_source(
        "routine=void scale(int n, double *x);\ninit={ n=Macro(NS, 64); x=Vector(double, RANDOM, _, n); };\n",
        "scale.spec",
        &[],
    )
    .and_then(|c| c.for_use(spec_lang::Use::Profile))
    .unwrap_or_else(|e| panic!("{e}"));
    let shims =
        interpose::build_interposers(&cc, &spec, &dir.path().join("shim"), &[], Some(&cache))
            .unwrap();
    assert_eq!(compiles_of_the_runtime(), 1, "compiled again");
    assert!(shims.preload_shim.is_file() && shims.runtime.static_lib.is_file());
    let calls = logged.calls();
    let preload = calls
        .iter()
        .find(|l| l.contains(&shims.preload_shim.display().to_string()))
        .expect("the preload shim's link");
    assert!(
        preload.contains("tdg_instrument.o") && !preload.contains("tdg_instrument.c"),
        "{preload}"
    );
}
