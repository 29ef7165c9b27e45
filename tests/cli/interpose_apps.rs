//! `tdg profile --spec` on unmodified programs from Debian (installed by
//! scripts/setup.d/45-python-numpy.sh): python3 + numpy calling cblas_dgemm
//! in the BLAS its extension module loads with RTLD_LOCAL, and /bin/bzip2
//! calling BZ2_blockSort in libbz2 through the PLT, profiled with
//! prototype-only specs.

use crate::interpose_support;
use crate::support::{json_of, tdg_in as tdg};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn example(rel: &str) -> String {
    testkit::repo()
        .join("instrument/examples")
        .join(rel)
        .display()
        .to_string()
}

/// Multiplies a 64x32 by a 32x48 matrix 7 times and a 100x80 by an 80x20
/// one 3 times, and prints checksums of the results.
const SCRIPT: &str = r#"
import numpy as np
rng = np.random.default_rng(7)
a, b = rng.random((64, 32)), rng.random((32, 48))
c, d = rng.random((100, 80)), rng.random((80, 20))
x = sum((a @ b).sum() for _ in range(7))
y = sum((c @ d).sum() for _ in range(3))
print(f"checksums {x:.6f} {y:.6f}")
"#;

#[test]
fn numpy_matmul_under_debians_python3_is_profiled_in_its_local_blas() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("script.py"), SCRIPT).unwrap();
    let python = interpose_support::PYTHON;
    let plain = interpose_support::plain_python_run(d);
    let spec = example("blas/cblas_dgemm.spec");
    let run = tdg(
        &[
            "profile",
            "--spec",
            &spec,
            "-o",
            "dgemm.tdgp",
            "--",
            python,
            "script.py",
        ],
        d,
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert_eq!(run.stdout, plain.stdout, "the script's own output: {err}");

    let rep = json_of(&tdg(&["profile", "report", "dgemm.tdgp", "--json"], d));
    assert_eq!(rep["calls"], 10);
    let defined_in = rep["defined_in"].as_str().unwrap();
    assert!(
        defined_in.contains("libblas.so") || defined_in.contains("openblas"),
        "found in Debian's BLAS, not in numpy's module: {defined_in}"
    );
    // Each context's sizes ("m=100 n=20 k=80") with its call count.
    let mut contexts: Vec<(String, u64)> = rep["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let sizes: Vec<String> = c["values"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| ["m", "n", "k"].contains(&v["name"].as_str().unwrap()))
                .map(|v| format!("{}={}", v["name"].as_str().unwrap(), v["value"]))
                .collect();
            (sizes.join(" "), c["calls"].as_u64().unwrap())
        })
        .collect();
    contexts.sort_by_key(|c| c.1);
    assert_eq!(
        contexts,
        vec![("m=100 n=20 k=80".into(), 3), ("m=64 n=48 k=32".into(), 7)],
        "{rep}"
    );
}

fn input(d: &Path) -> PathBuf {
    let p = d.join("input.txt");
    interpose_support::text_input(&p, 3_000_000);
    p
}

#[test]
fn debians_bzip2_is_profiled_through_libbz2s_plt_with_a_two_line_spec() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = input(d);
    let compressed = std::fs::File::create(d.join("input.txt.bz2")).unwrap();
    let p = interpose_support::profile_bzip2(d, &input, compressed.into());
    // The output is bzip2's own: it decompresses to the input.
    let back = Command::new("/bin/bzip2")
        .args(["-dc", "input.txt.bz2"])
        .current_dir(d)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(back.stdout == std::fs::read(&input).unwrap());
    // One BZ2_blockSort per compressed block; `bzip2 -tvv` lists the blocks.
    let blocks = Command::new("/bin/bzip2")
        .args(["-tvv", "input.txt.bz2"])
        .current_dir(d)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&blocks.stderr);
    let nblocks = listing.matches("huff+mtf").count();
    assert!(nblocks >= 4, "{listing}");

    assert_eq!(p.routines[0].name, "BZ2_blockSort");
    assert!(
        p.routines[0].defined_in.ends_with("libbz2.so.1.0"),
        "{}",
        p.routines[0].defined_in
    );
    assert_eq!(p.records.len(), nblocks);
    // Sorting a 900 kB block takes milliseconds, not the shim's nanoseconds.
    assert!(p.records.iter().all(|r| p.ticks_to_ns(r.ticks) > 1e6));
}

/// The sizes numpy's two products pass to cblas_dgemm (row-major, no
/// transpose): M, N, K, lda, ldb, ldc.
const PRODUCTS: [([i64; 6], u64); 2] = [
    ([64, 48, 32, 32, 48, 48], 7),
    ([100, 20, 80, 80, 20, 20], 3),
];
const SIZES: [&str; 6] = ["M", "N", "K", "lda", "ldb", "ldc"];

/// cblas_dgemm declared as CBLAS declares it (order and transposes as
/// ints): all fourteen parameters are recorded, the ones that size the
/// spec's operands first, so every leading dimension reaches the report;
/// and the spec derived from each context allocates exactly the blocks
/// numpy passed.
#[test]
fn numpy_dgemm_with_cblas_own_prototype_records_every_size_and_derives_sized_operands() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("script.py"), SCRIPT).unwrap();
    let plain = interpose_support::plain_python_run(d);
    let spec = example("blas/cblas_dgemm_natural.spec");
    let python = interpose_support::PYTHON;
    let run = tdg(
        &[
            "profile",
            "--spec",
            &spec,
            "-o",
            "d.tdgp",
            "--",
            python,
            "script.py",
        ],
        d,
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert_eq!(run.stdout, plain.stdout, "{err}");

    let p = instrument::format::read(&d.join("d.tdgp")).unwrap();
    let names: Vec<&str> = p.routines[0]
        .values
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "M", "K", "lda", "ldb", "ldc", "Order", "TransA", "TransB", "N", "alpha", "beta", "A",
            "B", "C"
        ],
        "sizing integers first, then the other integers, doubles, addresses"
    );
    assert!(p.records.iter().all(|r| r.values().len() == 14));

    let rep = json_of(&tdg(&["profile", "report", "d.tdgp", "--json"], d));
    let mut seen: Vec<([i64; 6], u64, usize)> = rep["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let value = |name: &str| {
                c["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == name)
                    .unwrap_or_else(|| panic!("{name} missing from {c}"))["value"]
                    .as_i64()
                    .unwrap()
            };
            (
                SIZES.map(value),
                c["calls"].as_u64().unwrap(),
                c["rank"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    seen.sort_by_key(|s| std::cmp::Reverse(s.1));
    assert_eq!(
        seen.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
        PRODUCTS,
        "{rep}"
    );

    for (sizes, _, rank) in &seen {
        let out = format!("rank{rank}.spec");
        let derive = tdg(
            &[
                "spec-from-profile",
                "d.tdgp",
                "--spec",
                &spec,
                "--rank",
                &rank.to_string(),
                "-o",
                &out,
                "--contexts",
                &format!("rank{rank}.json"),
            ],
            d,
        );
        assert!(
            derive.status.success(),
            "{}",
            String::from_utf8_lossy(&derive.stderr)
        );
        let text = std::fs::read_to_string(d.join(&out)).unwrap();
        let derived = spec_lang::check_source(&text, &out, &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap_or_else(|e| panic!("{e}"));
        let env = spec_lang::eval::typed_env(&derived, &Default::default()).unwrap();
        let elems = |name: &str| {
            spec_lang::eval::array_elems(derived.array_for(name).unwrap(), &env).unwrap() as i64
        };
        let [m, _, k, lda, ldb, ldc] = *sizes;
        assert_eq!(
            [elems("A"), elems("B"), elems("C")],
            [lda * m, ldb * k, ldc * m],
            "the operands numpy passed, from the recorded sizes:\n{text}"
        );
    }
}

/// numpy over OpenBLAS (pthreads), profiled through the shim with
/// `OPENBLAS_NUM_THREADS` at 2 and at 1: every context carries the threads
/// the process ran with (OpenBLAS's workers beside the interpreter's
/// thread), all calls come from the one interpreter thread, and the spec
/// derived from the two-thread profile times the routine on two threads.
#[test]
fn numpy_over_openblas_contexts_carry_the_thread_count() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("script.py"), SCRIPT).unwrap();
    let blas = std::fs::canonicalize("/lib/x86_64-linux-gnu/libblas.so.3").unwrap();
    assert!(
        blas.to_string_lossy().contains("openblas"),
        "libblas.so.3 is {}, not OpenBLAS: run scripts/setup (45-python-numpy.sh installs libopenblas0-pthread)",
        blas.display()
    );
    let spec = example("blas/cblas_dgemm.spec");
    for threads in [2, 1] {
        let profile = format!("t{threads}.tdgp");
        let run = crate::support::tdg_command()
            .args(["profile", "--spec", &spec, "-o", &profile, "--"])
            .args([interpose_support::PYTHON, "script.py"])
            .env("OPENBLAS_NUM_THREADS", threads.to_string())
            .current_dir(d)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let rep = json_of(&tdg(&["profile", "report", &profile, "--json"], d));
        let contexts = rep["contexts"].as_array().unwrap();
        assert_eq!(contexts.len(), 2, "{rep}");
        for c in contexts {
            assert_eq!(c["threads"], threads, "{c}");
            assert_eq!(c["callers"], 1, "{c}");
        }
        let derive = tdg(
            &[
                "spec-from-profile",
                &profile,
                "--spec",
                &spec,
                "-o",
                "d.spec",
            ],
            d,
        );
        assert!(
            derive.status.success(),
            "{}",
            String::from_utf8_lossy(&derive.stderr)
        );
        let text = std::fs::read_to_string(d.join("d.spec")).unwrap();
        assert_eq!(
            text.contains("threads=2;"),
            threads == 2,
            "one thread is the driver's default:\n{text}"
        );
        let contexts: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.join("cblas_dgemm.contexts.json")).unwrap(),
        )
        .unwrap();
        assert!(
            contexts["contexts"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["threads"] == threads),
            "{contexts}"
        );
    }
}
