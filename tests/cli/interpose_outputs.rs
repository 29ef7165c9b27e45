//! Verification of candidates on an image captured through the shim, with no
//! source change: Debian's unmodified python3 + numpy calling cblas_dgemm in
//! its BLAS (scripts/setup.d/45-python-numpy.sh). The spec's
//! `returns(c[m*ldc])` makes the generated region shim declare C, counted
//! from the call's own arguments, so `tdg checkpoint time --impl K.c`
//! compares the candidate's C with the library's on the application's data.
//! Real CRIU: needs root and `scripts/setup`.

use crate::interpose_support;
use crate::support::{json_of, tdg_command, tdg_in as tdg};
use std::path::Path;
use std::process::Command;

/// C = A B with A 120x90 and B 90x70, four times, and a checksum. numpy calls
/// the row-major cblas_dgemm with m=120, n=70, k=90, ldc=70.
const SCRIPT: &str = r#"
import numpy as np
rng = np.random.default_rng(11)
a, b = rng.random((120, 90)), rng.random((90, 70))
x = sum((a @ b).sum() for _ in range(4))
print(f"checksum {x:.6f}")
"#;
const M: u64 = 120;
const N: u64 = 70;

/// cblas_dgemm as the reference BLAS defines it, any layout and transposes.
/// `WRONG=1` adds 1 to the first element of C's last row: the deliberate
/// error the verification must find, at element (m-1)*ldc.
const CANDIDATE: &str = r#"
enum { RowMajor = 101, NoTrans = 111 };

void cblas_dgemm(int layout, int transa, int transb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
#if WRONG
    int rows = m, row_major = layout == RowMajor;
#endif
    /* A row-major product is the column-major one of the transposes. */
    if (layout == RowMajor) {
        int t = m; m = n; n = t;
        const double *p = a; a = b; b = p;
        t = lda; lda = ldb; ldb = t;
        t = transa; transa = transb; transb = t;
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                double x = transa == NoTrans ? a[i + (long)p * lda] : a[p + (long)i * lda];
                double y = transb == NoTrans ? b[p + (long)j * ldb] : b[j + (long)p * ldb];
                s += x * y;
            }
            c[i + (long)j * ldc] = alpha * s + (beta == 0.0 ? 0.0 : beta * c[i + (long)j * ldc]);
        }
#if WRONG
    if (row_major)
        c[(long)(rows - 1) * ldc] += 1.0;
#endif
}
"#;

fn dgemm_spec() -> String {
    testkit::repo()
        .join("instrument/examples/blas/cblas_dgemm.spec")
        .display()
        .to_string()
}

#[test]
fn numpys_dgemm_candidates_are_verified_on_an_image_captured_through_the_shim() {
    let _alone = testkit::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("script.py"), SCRIPT).unwrap();
    std::fs::write(d.join("dgemm.c"), CANDIDATE).unwrap();
    let python = interpose_support::PYTHON;
    let plain = interpose_support::plain_python_run(d);
    let spec = dgemm_spec();

    // Call 3 of 4, delay 1; the script runs on to its normal output.
    let cap = tdg(
        &[
            "checkpoint",
            "capture",
            "--spec",
            &spec,
            "--call",
            "3",
            "--delay",
            "1",
            "-o",
            "img",
            "--",
            python,
            "script.py",
        ],
        d,
    );
    let err = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{err}");
    assert!(err.contains("region cblas_dgemm, call 3, delay 1"), "{err}");
    assert_eq!(cap.stdout, plain.stdout, "{err}");

    // A correct candidate: C compared element by element with the BLAS's,
    // all m*ldc of them, within the default tolerance (another summation
    // order than the BLAS's).
    let ok = json_of(&tdg(
        &[
            "checkpoint",
            "time",
            "-r",
            "3",
            "--json",
            "--impl",
            "dgemm.c",
            "img",
        ],
        d,
    ));
    assert_eq!(ok["site"], "cblas_dgemm");
    assert_eq!(ok["verification"]["outputs"], 1, "{ok}");
    assert_eq!(ok["verification"]["elements"], M * N, "{ok}");
    assert!(ok["verification"]["mismatch"].is_null(), "{ok}");
    assert!(ok["region_ns"]["median"].as_f64().unwrap() > 0.0);

    // The same source made wrong at one element: exit 6 (the contract's
    // verification failure) and that element named, with both values.
    let wrong = tdg(
        &[
            "checkpoint",
            "time",
            "-r",
            "3",
            "--impl",
            "dgemm.c",
            "-D",
            "WRONG=1",
            "img",
        ],
        d,
    );
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(6), "{err}");
    let first = (M - 1) * N;
    assert!(
        err.contains(&format!(
            "verification FAILED: output 0 element {first}: original "
        )) && err.contains(", candidate "),
        "{err}"
    );
    // one line of error (the image's substitutions are warned beside it)
    assert_eq!(
        err.lines().filter(|l| !l.contains("WARN")).count(),
        1,
        "{err}"
    );

    // The image is untouched: the library's own code still restores and runs.
    let orig = json_of(&tdg(&["checkpoint", "time", "-r", "1", "--json", "img"], d));
    assert_eq!(orig["call"], 3);

    // The same prototype-only spec with a checkpoint clause: `tdg run` and
    // `tdg tune` time candidates on the image with no init written, and the
    // search counts the wrong configuration as a verification failure.
    let src = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        d.join("dgemm_ckpt.spec"),
        format!("{src}checkpoint={{ image=\"img\"; mode=delayed(1); }};\n"),
    )
    .unwrap();
    let run = tdg(
        &[
            "run",
            "dgemm_ckpt.spec",
            "--impl",
            "dgemm.c",
            "-D",
            "WRONG=1",
        ],
        d,
    );
    assert_eq!(
        run.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let tune = tdg(
        &[
            "tune",
            "dgemm_ckpt.spec",
            "--impl",
            "dgemm.c",
            "--param",
            "WRONG=0,1",
            "--exhaustive",
            "--no-model",
            "--samples",
            "2",
        ],
        d,
    );
    let out = String::from_utf8_lossy(&tune.stdout);
    assert!(
        tune.status.success(),
        "{}",
        String::from_utf8_lossy(&tune.stderr)
    );
    assert!(
        out.contains("best         WRONG=0")
            && out.contains("2 of 2 configurations (")
            && out.contains(", 1 failed)"),
        "{out}"
    );
    let log = std::fs::read_to_string(d.join("dgemm_ckpt.tune.jsonl")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"failure\":\"verification\"")
                && l.contains(&format!("output 0 element {first}"))),
        "{log}"
    );

    // The plain path with the same shim (its declarations included): the
    // in-app reference times call 3 in plain runs.
    let inapp = json_of(&tdg(
        &[
            "checkpoint",
            "inapp",
            "--spec",
            &spec,
            "--call",
            "3",
            "--runs",
            "2",
            "--json",
            "--",
            python,
            "script.py",
        ],
        d,
    ));
    assert_eq!(inapp["samples_ns"].as_array().unwrap().len(), 2, "{inapp}");
}

#[test]
fn an_output_the_call_cannot_count_is_refused_before_the_program_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let src = std::fs::read_to_string(dgemm_spec()).unwrap();
    std::fs::write(d.join("bad.spec"), src.replace("c[m*ldc]", "c[m*ldcc]")).unwrap();
    let err = refused_capture(d, &["bad.spec"]);
    assert!(
        err.contains("bad.spec:")
            && err
                .contains("the count of `c` names `ldcc`, which is not a parameter of cblas_dgemm")
            && err.contains("did you mean `ldc`"),
        "{err}"
    );
}

/// `tdg checkpoint capture --spec SPEC_ARGS... --call 1 -o img -- sh -c
/// 'touch ran'` in `d`, which must be refused before the program runs and
/// without a panic; its stderr.
fn refused_capture(d: &Path, spec_args: &[&str]) -> String {
    let mut args = vec!["checkpoint", "capture", "--spec"];
    args.extend(spec_args);
    args.extend([
        "--call",
        "1",
        "-o",
        "img",
        "--",
        "/bin/sh",
        "-c",
        "touch ran",
    ]);
    let out = tdg(&args, d);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!d.join("ran").exists() && !d.join("img").exists(), "{err}");
    err
}

/// CRC-32 one bit at a time, polynomial `POLY` (reflected): 0xEDB88320 is
/// zlib's (IEEE 802.3), 0x82F63B78 (Castagnoli) a plausible wrong one.
const CRC32: &str = r#"
unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned int len)
{
    if (!buf)
        return 0;
    crc = ~crc & 0xffffffffUL;
    for (unsigned int i = 0; i < len; i++) {
        crc ^= buf[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (POLY & (0UL - (crc & 1)));
    }
    return ~crc & 0xffffffffUL;
}
"#;

/// A routine whose output is its result: `returns(crc32)` makes the shim
/// keep the call's return value as a one-element output. zlib's crc32
/// inside minigzip (built from Debian's source by scripts/setup), call 5.
#[test]
fn a_return_value_named_in_returns_is_compared_on_the_image() {
    let _alone = testkit::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let z = interpose_support::zlib_dir();
    interpose_support::text_input(&d.join("input.txt"), 400_000);
    std::fs::write(
        d.join("crc32.spec"),
        "routine=unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len);\nreturns(crc32);\n",
    )
    .unwrap();
    std::fs::write(d.join("crc.c"), CRC32).unwrap();
    let cap = tdg_command()
        .args([
            "checkpoint",
            "capture",
            "--spec",
            "crc32.spec",
            "--call",
            "5",
        ])
        .args(["--delay", "1", "-o", "img", "--"])
        .arg(z.join("minigzipsh"))
        .args(["-c", "input.txt"])
        .env("LD_LIBRARY_PATH", &z)
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        cap.status.success(),
        "{}",
        String::from_utf8_lossy(&cap.stderr)
    );
    let time = |poly: &str| {
        tdg(
            &[
                "checkpoint",
                "time",
                "-r",
                "2",
                "--json",
                "--impl",
                "crc.c",
                "-D",
                poly,
                "img",
            ],
            d,
        )
    };
    let ok = json_of(&time("POLY=0xEDB88320UL"));
    assert_eq!(ok["verification"]["outputs"], 1, "{ok}");
    assert_eq!(ok["verification"]["elements"], 1, "{ok}");
    assert!(ok["verification"]["mismatch"].is_null(), "{ok}");

    let wrong = time("POLY=0x82F63B78UL");
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(6), "{err}");
    assert!(
        err.contains("verification FAILED: output 0 element 0: original "),
        "{err}"
    );
}

/// A library routine that writes through a struct: the block `s->ptr`
/// points to (`s->c.n * k + s->pc->m` elements), the member `s->origin`,
/// and the block of the next node. It tolerates what its callers below
/// hand it: NULL pointers and counts that do not fit.
const WALK_H: &str = r#"
typedef struct cfg { int n; long m; } cfg;
typedef struct node { struct node *next; cfg c; cfg *pc; unsigned *ptr; int origin; } node;
void walk(node *s, int k);
"#;

const WALK_C: &str = r#"
#include "walk.h"

void walk(node *s, int k)
{
    long count;
    if (!s)
        return;
    if (__builtin_mul_overflow((long)s->c.n, (long)k, &count) ||
        (s->pc && __builtin_add_overflow(count, s->pc->m, &count)))
        count = 0;
    for (long i = 0; i < count; i++)
        s->ptr[i] = (unsigned)(i * 7 + k);
    s->origin = k;
    if (s->next)
        for (int i = 0; i < s->next->c.n; i++)
            s->next->ptr[i] = (unsigned)(3 * i + k);
}
"#;

/// Four calls: a NULL struct; no next node; a count that overflows; all
/// there. The program prints a checksum of what the calls wrote.
const WALK_MAIN: &str = r#"
#include <limits.h>
#include <stdio.h>
#include "walk.h"

int main(void)
{
    static unsigned a[64], b[64];
    cfg p = {0, 1}, huge = {0, LONG_MAX};
    node next = {0, {5, 0}, 0, b, 0};
    node s = {0, {10, 0}, &p, a, 0};
    walk(0, 1);
    walk(&s, 2);
    s.next = &next;
    s.pc = &huge;
    walk(&s, 3);
    s.pc = &p;
    p.m = 2;
    walk(&s, 3);
    unsigned long sum = 0;
    for (int i = 0; i < 64; i++)
        sum += a[i] * 3u + b[i];
    printf("checksum %lu origin %d\n", sum, s.origin);
    return 0;
}
"#;

/// Member paths in `returns(...)`: the shim reads them from each call's
/// arguments, NULL-checked at every `->` and with checked count arithmetic.
/// Captured at each of the four calls, the image declares exactly what the
/// call writes, and nothing where a pointer is NULL or the count overflows;
/// the program runs through all four calls to its normal output.
#[test]
fn member_paths_declare_what_each_call_writes_and_nothing_behind_null() {
    let _alone = testkit::exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("walk.h"), WALK_H).unwrap();
    std::fs::write(d.join("walk.c"), WALK_C).unwrap();
    std::fs::write(d.join("main.c"), WALK_MAIN).unwrap();
    for args in [
        &["-O2", "-fPIC", "-shared", "-o", "libwalk.so", "walk.c"][..],
        &["-O2", "-o", "main", "main.c", "-L.", "-lwalk"][..],
    ] {
        let cc = Command::new("cc")
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
    }
    std::fs::write(
        d.join("walk.spec"),
        "include=\"#include \\\"walk.h\\\"\";\nroutine=void walk(node* s, int k);\nreturns(s->ptr[s->c.n * k + s->pc->m], s->origin, s->next->ptr[s->next->c.n]);\n",
    )
    .unwrap();
    let plain = Command::new(d.join("main"))
        .env("LD_LIBRARY_PATH", d)
        .output()
        .unwrap();
    assert!(plain.status.success());
    // Elements declared at each call: s NULL; s->next NULL (10*2+1, 1, 0);
    // the count overflows (0, 1, 5); all there (10*3+2, 1, 5).
    for (call, elements) in [(1, 0), (2, 22), (3, 6), (4, 38)] {
        let image = format!("img{call}");
        let cap = tdg_command()
            .args(["checkpoint", "capture", "--spec", "walk.spec", "--call"])
            .arg(call.to_string())
            .args(["-o", &image, "--", "./main"])
            .env("LD_LIBRARY_PATH", d)
            .current_dir(d)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&cap.stderr);
        assert!(cap.status.success(), "call {call}: {err}");
        assert_eq!(cap.stdout, plain.stdout, "call {call}: {err}");
        let rep = json_of(&tdg(
            &[
                "checkpoint",
                "time",
                "-r",
                "1",
                "--json",
                "--impl",
                "walk.c",
                &image,
            ],
            d,
        ));
        assert_eq!(rep["verification"]["outputs"], 3, "call {call}: {rep}");
        assert_eq!(
            rep["verification"]["elements"], elements,
            "call {call}: {rep}"
        );
        assert!(rep["verification"]["mismatch"].is_null(), "{rep}");
    }

    // A member the struct does not have: one line naming the spec item and
    // what the compiler said, located in the spec; the program never runs.
    std::fs::write(
        d.join("typo.spec"),
        "include=\"#include \\\"walk.h\\\"\";\nroutine=void walk(node* s, int k);\nreturns(s->origin, s->ptr[s->c.nn]);\n",
    )
    .unwrap();
    let err = refused_capture(d, &["typo.spec"]);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains("typo.spec:3:20")
            && first.contains("returns item `s->ptr` does not compile against the spec's include=")
            && first.contains("no member named")
            && first.contains("nn"),
        "{err}"
    );
    assert!(!err.contains("compilation failed"), "{err}");
    // The header not where -I says: the include named, and the way out.
    let err = refused_capture(d, &["walk.spec", "-I", "elsewhere"]);
    assert!(
        err.lines().next().unwrap_or("").contains(
            "walk.spec:1:1: error: the spec's include `#include \"walk.h\"` does not compile: walk.h: No such file"
        ) && err.contains("-I DIR"),
        "{err}"
    );
}
