//! A deployment really routes each call: the tuned contexts run the
//! candidate at their own configuration, every other call the original,
//! in the preloaded form and in the `--wrap` form, and the program's
//! output is the original's.

use autotune::deploy::{deploy, DeployRequest, VariantBuild, PRELOAD_LIBRARY, WRAP_ARCHIVE};
use instrument::interpose::DispatchRoute;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps")
}

fn cc(args: &[&std::ffi::OsStr]) {
    let out = Command::new("cc").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spec() -> spec_lang::CheckedSpec {
    spec_lang::load(apps().join("scale.spec"), &[])
        .unwrap()
        .for_use(spec_lang::Use::Profile)
        .unwrap()
}

fn route(n: i64, a: f64, variant: usize) -> DispatchRoute {
    DispatchRoute {
        values: BTreeMap::from([("n".to_string(), n), ("a".to_string(), a.to_bits() as i64)]),
        variant,
        label: format!("n={n}, a={a}"),
    }
}

fn request(spec: &spec_lang::CheckedSpec) -> DeployRequest<'_> {
    DeployRequest {
        spec,
        include_dirs: vec![apps()],
        implementation: apps().join("scale_candidate.c"),
        extra: vec![],
        cc: None,
        cflags: vec!["-O2".into()],
        variants: vec![
            VariantBuild {
                label: "UNROLL=4".into(),
                defines: vec![("UNROLL".into(), "4".into())],
                code_offset: 0,
            },
            VariantBuild {
                label: "UNROLL=2".into(),
                defines: vec![("UNROLL".into(), "2".into())],
                code_offset: 0,
            },
        ],
        routes: vec![route(8192, 1.0000001, 0), route(512, 0.9999999, 1)],
    }
}

/// What the candidate said about which of its copies ran, sorted.
fn said(stderr: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.starts_with("candidate "))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

const EXPECTED: [&str; 2] = [
    "candidate UNROLL=2 first called with n=512",
    "candidate UNROLL=4 first called with n=8192",
];

#[test]
fn the_preloaded_dispatcher_runs_each_context_at_its_configuration() {
    let _load = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let lib = t.join("libscale.so");
    cc(&[
        "-O2".as_ref(),
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        apps().join("scale_lib.c").as_os_str(),
        "-o".as_ref(),
        lib.as_os_str(),
    ]);
    let app = t.join("app");
    cc(&[
        "-O2".as_ref(),
        apps().join("scale_app.c").as_os_str(),
        lib.as_os_str(),
        "-Wl,-rpath".as_ref(),
        t.as_os_str(),
        "-o".as_ref(),
        app.as_os_str(),
    ]);
    let spec = spec();
    let out = t.join("deployed");
    let deployed = deploy(&out, &request(&spec)).unwrap();
    assert_eq!(
        deployed.preload_library,
        out.canonicalize().unwrap().join(PRELOAD_LIBRARY)
    );

    let plain = Command::new(&app).output().unwrap();
    let tuned = Command::new(&app)
        .env("LD_PRELOAD", &deployed.preload_library)
        .output()
        .unwrap();
    assert!(
        tuned.status.success(),
        "{}",
        String::from_utf8_lossy(&tuned.stderr)
    );
    assert_eq!(plain.stdout, tuned.stdout, "the output is the original's");
    assert!(said(&plain.stderr).is_empty());
    // n=7 is no tuned context: it ran the original, which says nothing.
    assert_eq!(said(&tuned.stderr), EXPECTED);
}

#[test]
fn the_wrap_archive_routes_the_same_calls_in_a_static_link() {
    let _load = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let spec = spec();
    let out = t.join("deployed");
    let deployed = deploy(&out, &request(&spec)).unwrap();
    let archive = out.join(WRAP_ARCHIVE);
    assert_eq!(
        deployed.wrap_archive,
        out.canonicalize().unwrap().join(WRAP_ARCHIVE)
    );
    let app = t.join("app_static");
    cc(&[
        "-O2".as_ref(),
        apps().join("scale_app.c").as_os_str(),
        apps().join("scale_lib.c").as_os_str(),
        "-Wl,--wrap=scale".as_ref(),
        archive.as_os_str(),
        "-o".as_ref(),
        app.as_os_str(),
    ]);
    let run = Command::new(&app).output().unwrap();
    assert!(run.status.success());
    assert_eq!(said(&run.stderr), EXPECTED);
    let plain = t.join("app_plain");
    cc(&[
        "-O2".as_ref(),
        apps().join("scale_app.c").as_os_str(),
        apps().join("scale_lib.c").as_os_str(),
        "-o".as_ref(),
        plain.as_os_str(),
    ]);
    assert_eq!(Command::new(&plain).output().unwrap().stdout, run.stdout);
}

#[test]
fn a_directory_tdg_did_not_make_is_refused_and_kept() {
    let _load = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep me").unwrap();
    let spec = spec();
    let e = deploy(&mine, &request(&spec)).unwrap_err().to_string();
    assert!(e.contains("-o"), "{e}");
    assert_eq!(
        std::fs::read_to_string(mine.join("notes.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn a_candidate_that_does_not_define_the_routine_is_named() {
    let _load = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other.c");
    std::fs::write(&other, "void not_scale(double *x) { x[0] = 0; }\n").unwrap();
    let spec = spec();
    let mut r = request(&spec);
    r.implementation = other;
    let e = deploy(&tmp.path().join("d"), &r).unwrap_err().to_string();
    assert!(e.contains("does not define `scale`"), "{e}");
}

#[test]
fn the_dispatcher_is_warning_free_under_gcc_and_clang() {
    let _load = testkit::shared();
    let spec = spec();
    let r = request(&spec);
    let dispatch = instrument::interpose::Dispatch {
        variants: (0..2)
            .map(|i| instrument::interpose::DispatchVariant {
                symbol: instrument::interpose::variant_symbol(&spec, i),
                label: r.variants[i].label.clone(),
            })
            .collect(),
        routes: r.routes.clone(),
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("tdg_resolve.h"),
        instrument::runtime::RESOLVE_HEADER,
    )
    .unwrap();
    for kind in [
        instrument::interpose::InterposerKind::Preload,
        instrument::interpose::InterposerKind::Wrap,
    ] {
        let c = tmp.path().join(format!("d{kind:?}.c"));
        std::fs::write(
            &c,
            instrument::interpose::generate_dispatcher(&spec, kind, &dispatch).unwrap(),
        )
        .unwrap();
        for compiler in ["gcc", "clang"] {
            if !testkit::have(compiler) {
                panic!("{compiler} is not installed: scripts/setup installs it");
            }
            let out = Command::new(compiler)
                .args([
                    "-std=gnu11",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-fPIC",
                    "-c",
                    "-o",
                ])
                .arg(tmp.path().join("x.o"))
                .arg("-I")
                .arg(tmp.path())
                .arg(&c)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{compiler} {kind:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Each variant's code starts in the library where the drivers timed the
/// candidate (the spec's code_offset): the placement read back from the
/// library's own symbol table, not from what deploy says.
#[test]
fn every_variant_starts_in_the_library_at_the_offset_it_was_timed_at() {
    let _load = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec();
    for offset in [0u32, 1616, 48] {
        let out = tmp.path().join(format!("deployed{offset}"));
        let mut placed = request(&spec);
        for v in &mut placed.variants {
            v.code_offset = offset;
        }
        let deployed = deploy(&out, &placed).unwrap();
        assert_eq!(deployed.placements.len(), 2);
        for (i, p) in deployed.placements.iter().enumerate() {
            let symbol = instrument::interpose::variant_symbol(&spec, i);
            let address = toolchain::symbol_address(&deployed.preload_library, &symbol)
                .unwrap()
                .unwrap_or_else(|| panic!("{symbol} is not in the library"));
            assert_eq!(address % 4096, u64::from(offset), "{p:?}");
            assert!(p.as_timed(), "{p:?}");
        }
    }
}
