//! The host library's C control-pipe reader, compiled into this crate with
//! `TDG_CONTROL_FUZZ` (which exposes `tdg_control_fuzz`): the `control`
//! target runs the very code every restored copy runs. For the libFuzzer
//! binaries it is built by clang with SanitizerCoverage (and, with
//! TDG_FUZZ_ASAN=1, AddressSanitizer), as scripts/fuzz builds the Rust.

fn main() {
    let source = "../checkpoint/c/tdg_checkpoint.c";
    for path in [
        source,
        "../checkpoint/c/tdg_checkpoint.h",
        "../c-timing/c/tdg_timing.h",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-env-changed=TDG_FUZZ_ASAN");
    let mut build = cc::Build::new();
    build
        .file(source)
        .include("../c-timing/c")
        .include("../checkpoint/c")
        .define("TDG_CONTROL_FUZZ", None)
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true);
    if std::env::var_os("CARGO_FEATURE_LIBFUZZER").is_some() {
        build
            .compiler("clang")
            .flag("-fsanitize-coverage=inline-8bit-counters,pc-table,trace-cmp");
        if std::env::var("TDG_FUZZ_ASAN").as_deref() == Ok("1") {
            build.flag("-fsanitize=address");
        }
    }
    build.compile("tdg_control");
}
