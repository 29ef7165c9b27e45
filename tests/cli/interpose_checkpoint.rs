//! Checkpoints through the shim: `tdg checkpoint capture --spec` on Debian's
//! unmodified /bin/bzip2, no markers and no rebuild. The region is
//! BZ2_blockSort, which bzip2 calls in libbz2 through the PLT; the third
//! call, captured with delay 1, must match the application's own time of it
//! (`tdg checkpoint validate`, plain runs and samples interleaved), and a
//! slower candidate must not. Real CRIU: needs root and `scripts/setup`.

use crate::interpose_support;
use crate::support::{json_of, tdg_command as tdg};
use std::path::Path;
use std::process::{Command, Stdio};
use testkit::exclusive;

const CALL: usize = 3;

/// The cap on the validation's rounds: a round costs ~1-2 s here (a plain
/// run of bzip2 -9 on 3 MB, one restore and three samples). The test asks
/// only that the image is not told apart from the application (it matches,
/// or the interval holds 1): an image off by more than the host's noise is
/// told apart within fifteen rounds, and more would only narrow an
/// interval the test does not assert (it prints how close it came).
const MAX_ROUNDS: usize = 15;

fn spec() -> String {
    interpose_support::bz2_blocksort_spec()
}

fn median(v: Vec<f64>) -> f64 {
    stats::Summary::of(&v).expect("samples").median
}

/// One restore of `image`: the timed call's wall time.
fn restored_call_ns(image: &Path) -> f64 {
    let out = tdg()
        .args(["checkpoint", "time", "-r", "1", "--json"])
        .arg(image)
        .output()
        .unwrap();
    let rep = json_of(&out);
    assert_eq!(rep["site"], "BZ2_blockSort");
    assert_eq!(rep["call"], CALL as u64);
    rep["region_ns"]["median"].as_f64().unwrap()
}

/// `tdg checkpoint capture --spec BZ2_blockSort.spec --call CALL --delay 1`
/// of `/bin/bzip2 -9 -c INPUT` in `d`, bzip2's output to `stdout`.
fn capture_third_call(d: &Path, input: &Path, image: &Path, stdout: Stdio) -> std::process::Output {
    capture_third_call_of(&[spec().as_str()], d, input, image, stdout)
}

/// [`capture_third_call`] with `--spec SPEC_ARGS...` (a spec, then its `-I`).
fn capture_third_call_of(
    spec_args: &[&str],
    d: &Path,
    input: &Path,
    image: &Path,
    stdout: Stdio,
) -> std::process::Output {
    tdg()
        .args(["checkpoint", "capture", "--spec"])
        .args(spec_args)
        .arg("--call")
        .arg(CALL.to_string())
        .args(["--delay", "1", "-o"])
        .arg(image)
        .args(["--", "/bin/bzip2", "-9", "-c"])
        .arg(input)
        .current_dir(d)
        .stdout(stdout)
        .output()
        .unwrap()
}

#[test]
fn bzip2s_third_block_sort_is_checkpointed_through_the_shim_and_timed_like_in_the_app() {
    // The timing comparison must not share the 2 cores with another
    // bzip2 or anything else this binary runs.
    let _alone = exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = d.join("input.txt");
    interpose_support::text_input(&input, 3_000_000);
    let image = d.join("img");

    let compressed = std::fs::File::create(d.join("input.txt.bz2")).unwrap();
    let cap = capture_third_call(d, &input, &image, compressed.into());
    let err = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{err}");
    assert!(
        err.contains("region BZ2_blockSort, call 3, delay 1"),
        "{err}"
    );
    // The image carries its shim (restored copies map it from there), and
    // bzip2 went on to write its whole, correct output after the dump.
    assert!(image.join("preload/tdg_region_BZ2_blockSort.so").is_file());
    let back = Command::new("/bin/bzip2")
        .args(["-dc", "input.txt.bz2"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(back.stdout == std::fs::read(&input).unwrap());

    // The image's own record of call 3 (bzip2 ran it after the dump) is
    // held against the samples. Its verdict is one run of the application
    // against three samples seconds later, within 25 %, and a shared host
    // drifts more than that between moments (a Zen 3 host's samples, within
    // 4 % of each other, read 1.26x the captured run once): the verdict is
    // reported here, not asserted (`timing.rs`'s unit tests pin where it
    // says "disagrees"); the interleaved validate below is the test of the
    // image against the application.
    let rep = json_of(
        &tdg()
            .args(["checkpoint", "time", "-r", "3", "--format", "json"])
            .arg(&image)
            .output()
            .unwrap(),
    );
    assert_eq!(
        (rep["site"].as_str(), rep["call"].as_u64()),
        (Some("BZ2_blockSort"), Some(CALL as u64))
    );
    let captured = &rep["captured_call"];
    assert!(
        captured["captured_cpu_ns"].as_u64().unwrap() > 1_000_000,
        "{rep}"
    );
    let ratio = captured["median_ratio"].as_f64().unwrap();
    assert!(ratio.is_finite() && ratio > 0.0, "{rep}");
    assert!(captured["disagrees"].is_boolean(), "{rep}");
    assert!(captured["captured_minflt"].is_u64(), "{rep}");

    // `tdg checkpoint validate`: plain runs of bzip2 through the image's own
    // shim and samples of the image, alternating round by round (the
    // captured command by default, in the directory it was captured in).
    let validate = |extra: &[&str]| {
        tdg()
            .args(["checkpoint", "validate", "--format", "json"])
            .args(extra)
            .arg(&image)
            .output()
            .unwrap()
    };
    // As many rounds as the spread of the rounds' ratios needs, up to the
    // cap: a quiet host decides in 6-9, and validate stops at the first
    // verdict.
    let out = validate(&["--max-rounds", &MAX_ROUNDS.to_string()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    let e = &v["estimate"];
    let (ratio, low, high) = (
        e["ratio"].as_f64().unwrap(),
        e["low"].as_f64().unwrap(),
        e["high"].as_f64().unwrap(),
    );
    let rounds = v["rounds"].as_array().unwrap();
    eprintln!(
        "BZ2_blockSort call {CALL}: image/in-app {ratio:.3} ({low:.3}-{high:.3}) after {} rounds, {} clock; in-app median {:.2} ms, image median {:.2} ms; ratios {:?}",
        rounds.len(),
        v["clock"],
        v["in_app_ns"]["median"].as_f64().unwrap() / 1e6,
        v["image_ns"]["median"].as_f64().unwrap() / 1e6,
        rounds
            .iter()
            .map(|r| (r["ratio"].as_f64().unwrap() * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        v["shim"]
            .as_str()
            .map(|s| s.ends_with("preload/tdg_region_BZ2_blockSort.so")),
        Some(true)
    );
    // The call's CPU time is compared (a 60 ms call: wall time swings with
    // the host's other tenants, its CPU time far less). The image is not
    // told apart from the application: it matches within 10%, or, where a
    // loaded host leaves the interval wider than that, its ratio lies
    // within the 10% and its interval reaches into them. Not that the
    // interval holds 1: an image 3% faster than the program (0.97,
    // 0.86-0.998 after 12 rounds, Zen 3) is within the tolerance and still
    // misses 1. How close it comes is a benchmark's figure
    // (docs/benchmarks.md).
    assert_eq!(v["clock"], "cpu", "{v}");
    match v["verdict"].as_str() {
        Some("matches") => {
            assert!(out.status.success());
            assert!(low >= 1.0 / 1.1 && high <= 1.1, "{v}");
        }
        Some("undecided") => {
            eprintln!(
                "BZ2_blockSort: undecided on this host ({low:.3}-{high:.3}); checking that the ratio is within 10% and the interval reaches into them"
            );
            let band = checkpoint::validate::tolerance_band(
                v["tolerance"].as_f64().expect("the report carries its tolerance"),
            );
            assert!(band.0 <= ratio && ratio <= band.1, "{v}");
            assert!(low <= band.1 && band.0 <= high, "{v}");
        }
        other => panic!(
            "the image of BZ2_blockSort is told apart from bzip2 ({other:?}, rounds to decide at this spread: {}): {v}",
            v["rounds_to_decide"]
        ),
    }

    // A candidate that is slower (bzip2's own block sort at -O0) is flagged:
    // the image's samples run it, the plain runs libbz2's.
    let src = blocksort_source();
    let out = validate(&[
        "--impl",
        src.join("blocksort.c").to_str().unwrap(),
        "--cflags",
        &format!("-O0 -I{}", src.display()),
        "--no-verify",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["verdict"], "slower", "{v}");
    assert_eq!(out.status.code(), Some(8), "a check that said no");
    assert!(v["estimate"]["low"].as_f64().unwrap() > 1.1, "{v}");
}

#[test]
fn inapp_times_the_call_through_the_shim_and_an_uncalled_routine_is_explained() {
    // The timing comparison must not share the 2 cores with another
    // bzip2 or anything else this binary runs.
    let _alone = exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = d.join("input.txt");
    interpose_support::text_input(&input, 2_000_000);
    // The in-app reference of the marker path, with the shim as the markers.
    let out = tdg()
        .args([
            "checkpoint",
            "inapp",
            "--spec",
            &spec(),
            "--call",
            "2",
            "--runs",
            "3",
            "--json",
        ])
        .args(["--", "/bin/bzip2", "-9", "-c"])
        .arg(&input)
        .output()
        .unwrap();
    let rep = json_of(&out);
    assert_eq!(rep["site"], "BZ2_blockSort");
    let samples = rep["samples_ns"].as_array().unwrap();
    assert_eq!(samples.len(), 3);
    // A 900 kB block sort: milliseconds.
    assert!(
        samples.iter().all(|s| s.as_u64().unwrap() > 1_000_000),
        "{samples:?}"
    );

    // bzip2 never calls the decompressor's entry point while compressing:
    // no checkpoint, and one line saying what to check.
    std::fs::write(
        d.join("decompress.spec"),
        "routine=int BZ2_bzDecompressInit(void* strm, int verbosity, int small);\n",
    )
    .unwrap();
    let out = tdg()
        .args([
            "checkpoint",
            "capture",
            "--spec",
            "decompress.spec",
            "--call",
            "1",
            "-o",
            "img",
        ])
        .args(["--", "/bin/bzip2", "-9", "-c"])
        .arg(&input)
        .current_dir(d)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("before call 1 of region BZ2_bzDecompressInit")
            && err.contains("through a shared library"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// bzip2's own `blocksort.c` (Debian's source, unpacked by
/// scripts/setup.d/50-checkpoint-apps.sh) with its private header.
fn blocksort_source() -> std::path::PathBuf {
    let src = interpose_support::deps_dir().join("bzip2-ckpt/src");
    assert!(
        src.join("blocksort.c").is_file() && src.join("bzlib_private.h").is_file(),
        "{} lacks blocksort.c: run scripts/setup",
        src.display()
    );
    src
}

/// The shim redirects to a candidate in restored copies with no source
/// change: BZ2_blockSort built from bzip2's own blocksort.c replaces
/// libbz2's in the copies. Its effect is the proof that it ran: the same
/// source at -O0 sorts the same block several times slower than at -O2.
#[test]
fn a_candidate_built_from_blocksort_c_replaces_libbz2s_in_restored_copies() {
    // The timing comparison must not share the 2 cores with another
    // bzip2 or anything else this binary runs.
    let _alone = exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = d.join("input.txt");
    interpose_support::text_input(&input, 3_000_000);
    let image = d.join("img");
    let cap = capture_third_call(d, &input, &image, Stdio::null());
    assert!(
        cap.status.success(),
        "{}",
        String::from_utf8_lossy(&cap.stderr)
    );
    let src = blocksort_source();
    let candidate_ns = |opt: &str| -> f64 {
        let out = tdg()
            .args(["checkpoint", "time", "-r", "3", "--json", "--impl"])
            .arg(src.join("blocksort.c"))
            .arg("--cflags")
            .arg(format!("{opt} -I{}", src.display()))
            .arg(&image)
            .output()
            .unwrap();
        let rep = json_of(&out);
        assert_eq!(rep["site"], "BZ2_blockSort");
        rep["region_ns"]["median"].as_f64().unwrap()
    };
    // One pair of restores (each the median of three samples) shows the
    // ~2x; another tenant's burst on one side of it is measured again, up
    // to three pairs in all, the ratio of the medians over the pairs.
    let (mut o0, mut o2) = (Vec::new(), Vec::new());
    let mut ratio = 0.0;
    for _ in 0..3 {
        o2.push(candidate_ns("-O2"));
        o0.push(candidate_ns("-O0"));
        ratio = median(o0.clone()) / median(o2.clone());
        if ratio > 1.5 {
            break;
        }
    }
    eprintln!("BZ2_blockSort from blocksort.c on the shim's image: -O0 {o0:?} ns, -O2 {o2:?} ns, -O0/-O2 {ratio:.2}");
    assert!(
        ratio > 1.5,
        "-O0/-O2 = {ratio:.2}: the candidate did not replace libbz2's BZ2_blockSort (-O0 {o0:?}, -O2 {o2:?})"
    );
    // An uncompilable candidate is one clear error, and the image still
    // restores afterwards.
    std::fs::write(d.join("broken.c"), "void BZ2_blockSort(void *s) { s-> }\n").unwrap();
    let out = tdg()
        .args(["checkpoint", "time", "-r", "1", "--impl"])
        .arg(d.join("broken.c"))
        .arg(&image)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("broken.c"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(restored_call_ns(&image) > 0.0);
}

/// bzip2's own block sort with a deliberate bug, built from its blocksort.c:
/// `SWAP_AT=i` exchanges `ptr[i]` and `ptr[i+1]` after sorting (the order is
/// wrong from element i on), `ORIGPTR_OFF=k` moves `origPtr` by k.
const WRONG_BLOCKSORT: &str = r#"
#define BZ2_blockSort bzip2s_blockSort
#include "blocksort.c"
#undef BZ2_blockSort

void BZ2_blockSort(EState *s)
{
    bzip2s_blockSort(s);
#ifdef SWAP_AT
    UInt32 t = s->ptr[SWAP_AT];
    s->ptr[SWAP_AT] = s->ptr[SWAP_AT + 1];
    s->ptr[SWAP_AT + 1] = t;
#endif
#ifdef ORIGPTR_OFF
    s->origPtr += ORIGPTR_OFF;
#endif
}
"#;

/// `original A, candidate B` of a verification failure line.
fn original_and_candidate(line: &str) -> (i64, i64) {
    let value = |key: &str| -> i64 {
        let (_, rest) = line.split_once(key).unwrap_or_else(|| panic!("{line}"));
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        digits.parse().unwrap_or_else(|_| panic!("{line}"))
    };
    (value("original "), value("candidate "))
}

/// Verification on an image of the unmodified /bin/bzip2: the spec names
/// what BZ2_blockSort writes through its EState (`returns(s->ptr[s->nblock],
/// s->origPtr)`, the struct from bzip2's own header), the shim declares it
/// from each call's arguments, and `tdg checkpoint time --impl` compares a
/// candidate's with libbz2's. bzip2's own blocksort.c passes on the whole
/// block; the same sort with two entries swapped, or origPtr off by one,
/// fails with exit 6 at exactly that element.
#[test]
fn a_blocksort_candidate_is_verified_on_the_image_through_estates_members() {
    let _alone = exclusive();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let input = d.join("input.txt");
    interpose_support::text_input(&input, 3_000_000);
    let src = blocksort_source();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("instrument/examples/bzip2/BZ2_blockSort_outputs.spec");
    let (spec, include) = (spec.display().to_string(), src.display().to_string());
    let cap = capture_third_call_of(
        &[&spec, "-I", &include],
        d,
        &input,
        &d.join("img"),
        Stdio::null(),
    );
    let err = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{err}");
    assert!(
        err.contains("region BZ2_blockSort, call 3, delay 1"),
        "{err}"
    );
    std::fs::write(d.join("wrong.c"), WRONG_BLOCKSORT).unwrap();
    let cflags = format!("-O2 -I{}", src.display());
    let time = |candidate: &Path, defines: &[&str], json: bool| {
        let mut cmd = tdg();
        cmd.args(["checkpoint", "time", "-r", "3", "--impl"])
            .arg(candidate)
            .args(["--cflags", &cflags])
            .args(defines)
            .arg("img")
            .current_dir(d);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };

    // The sort, timed and verified: the third block of `bzip2 -9` is full,
    // nblockMAX = 100000*9 - 19 entries (bzlib.c), plus up to 4 of the last
    // run (ADD_CHAR_TO_BLOCK), and origPtr.
    let ok = json_of(&time(&src.join("blocksort.c"), &[], true));
    assert_eq!(ok["site"], "BZ2_blockSort");
    assert_eq!(ok["verification"]["outputs"], 2, "{ok}");
    let elements = ok["verification"]["elements"].as_u64().unwrap();
    assert!((899_981 + 1..=899_981 + 4 + 1).contains(&elements), "{ok}");
    assert!(ok["verification"]["mismatch"].is_null(), "{ok}");
    let ns = ok["region_ns"]["median"].as_f64().unwrap();
    assert!(ns > 1e6, "a 900 kB block sort in {ns} ns: {ok}");
    eprintln!(
        "BZ2_blockSort from blocksort.c on /bin/bzip2's image: {:.2} ms median, verified on {elements} elements",
        ns / 1e6
    );

    // Two entries of the sorted order swapped: the first wrong one named.
    let out = time(&d.join("wrong.c"), &["-D", "SWAP_AT=1000"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    // one line of error (the image's substitutions are warned beside it)
    assert_eq!(
        err.lines().filter(|l| !l.contains("WARN")).count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("verification FAILED: output 0 element 1000: original "),
        "{err}"
    );
    let (orig, cand) = original_and_candidate(&err);
    assert_ne!(orig, cand, "{err}");
    // origPtr off by one: the second output, its only element.
    let out = time(&d.join("wrong.c"), &["-D", "ORIGPTR_OFF=1"], false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(
        err.contains("verification FAILED: output 1 element 0: original "),
        "{err}"
    );
    let (orig, cand) = original_and_candidate(&err);
    assert_eq!(cand, orig + 1, "{err}");
}
