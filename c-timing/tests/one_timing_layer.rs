//! One C timing layer: every C runtime tdg ships reads time through
//! `tdg_timing.h`, and no other file of the repository holds a cycle-counter
//! read of its own (a second copy is how the runtimes drifted apart before:
//! four serialised reads, two invariance checks).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const HEADER: &str = "c-timing/c/tdg_timing.h";

/// The file each runtime's timing enters through.
const RUNTIME_ENTRIES: &[&str] = &[
    "templates/tdg_runtime.h",
    "instrument/c/tdg_instrument.c",
    "checkpoint/c/tdg_checkpoint.c",
    "probe/c/bench_common.c",
];

/// Where C runtimes and C templates live: the driver's top-level
/// `templates/` and each crate's `c/`.
fn runtime_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![repo().join("templates")];
    for entry in std::fs::read_dir(repo()).unwrap() {
        let c = entry.unwrap().path().join("c");
        if c.is_dir() {
            dirs.push(c);
        }
    }
    dirs
}

fn is_c_like(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    [".c", ".h", ".hbs", ".S"].iter().any(|e| name.ends_with(e))
}

/// The text with C comments blanked out (a comment may explain rdtscp).
fn strip_c_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            out.push(' ');
        } else if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn includes_timing_header(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim() == "#include \"tdg_timing.h\"")
}

/// Whether `text` includes the header, itself or through a header of its
/// own directory that does (`tdg_runtime.c` through `tdg_runtime.h`).
fn reaches_timing_header(dir: &Path, text: &str) -> bool {
    includes_timing_header(text)
        || text.lines().any(|l| {
            l.trim()
                .strip_prefix("#include \"")
                .and_then(|rest| rest.strip_suffix('"'))
                .and_then(|name| std::fs::read_to_string(dir.join(name)).ok())
                .is_some_and(|inner| includes_timing_header(&inner))
        })
}

/// Every file of the repository's source tree (no build output, no
/// provisioned tools, no git internals).
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_symlink() {
            continue;
        }
        if path.is_dir() {
            if !["target", ".git", ".deps", "node_modules"].contains(&name.as_str()) {
                source_files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_c_runtime_enters_through_the_timing_header() {
    for entry in RUNTIME_ENTRIES {
        let text = std::fs::read_to_string(repo().join(entry)).unwrap();
        assert!(
            includes_timing_header(&text),
            "{entry} does not #include \"tdg_timing.h\""
        );
    }
    // A runtime file that reads a clock itself includes the header too, so
    // the fallback clock and the readers are the header's.
    let mut checked = 0;
    for dir in runtime_dirs() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if !is_c_like(&path) || path.ends_with("tdg_timing.h") {
                continue;
            }
            checked += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            if strip_c_comments(&text).contains("clock_gettime(") {
                assert!(
                    reaches_timing_header(&dir, &text),
                    "{} reads a clock but does not include tdg_timing.h",
                    path.display()
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} runtime files found");
}

#[test]
fn no_file_but_the_header_reads_the_cycle_counter() {
    let mut files = Vec::new();
    source_files(&repo(), &mut files);
    let header = repo().join(HEADER);
    let mut offenders = Vec::new();
    let mut scanned = 0;
    for path in files {
        if path == header {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // binary
        };
        let name = path.to_string_lossy();
        let hit = if is_c_like(&path) {
            strip_c_comments(&text).contains("rdtsc")
        } else if name.ends_with(".rs") {
            // C emitted from Rust strings, or Rust's own intrinsic.
            ["_rdtsc", "rdtsc\\n\\t", "rdtscp\\n\\t", "\\trdtsc"]
                .iter()
                .any(|p| text.contains(p))
        } else {
            continue;
        };
        scanned += 1;
        if hit && !path.ends_with("tests/one_timing_layer.rs") {
            offenders.push(
                path.strip_prefix(repo())
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(scanned > 100, "only {scanned} source files scanned");
    assert!(
        offenders.is_empty(),
        "cycle-counter reads outside {HEADER}: {offenders:?}; use tdg_tsc_begin/tdg_tsc_end/tdg_tsc_read"
    );
}

#[test]
fn the_stripper_keeps_code_and_drops_comments() {
    let c = "a /* rdtsc */ b // rdtscp\nc \"x\" rdtsc";
    let s = strip_c_comments(c);
    assert!(!s.contains("rdtscp") && s.contains("a ") && s.contains("rdtsc"));
}

/// The header's verdict, from a program built with it, is the kernel's
/// reading of the same cpuid bits: invariant (`constant_tsc` and
/// `nonstop_tsc`, which Linux sets from cpuid 0x80000007 EDX[8]) and
/// `rdtscp`.
#[test]
#[cfg(target_arch = "x86_64")]
fn the_headers_verdict_is_the_kernels_reading_of_cpuid() {
    let cc = toolchain::CCompiler::find(None).expect("a C compiler");
    let verdict = c_timing::tsc_verdict(&cc).unwrap();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .expect("/proc/cpuinfo has a flags line");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    let kernel_says = has("constant_tsc") && has("nonstop_tsc") && has("rdtscp");
    assert_eq!(
        verdict == c_timing::TscVerdict::Usable,
        kernel_says,
        "header: {verdict:?}; kernel flags constant_tsc/nonstop_tsc/rdtscp: {}/{}/{}",
        has("constant_tsc"),
        has("nonstop_tsc"),
        has("rdtscp")
    );
}

/// `tdg_pair_cost` on scripted readers: the overhead is the least pair, the
/// resolution the least non-zero one, and the step the least difference
/// between two distinct pair costs (a VM's TSC read in steps of 26 ticks).
#[test]
fn the_pair_cost_reads_the_overhead_and_the_counters_step() {
    let cc = toolchain::CCompiler::find(None).expect("a C compiler");
    let dir = tempfile::tempdir().unwrap();
    c_timing::write_header(dir.path()).unwrap();
    let source = dir.path().join("pairs.c");
    std::fs::write(
        &source,
        r#"#include <stdio.h>
#include "tdg_timing.h"
static const uint64_t costs[] = {78, 52, 104, 52, 78};
static int k;
static uint64_t begin(void) { return 1000; }
static uint64_t end(void) { return 1000 + costs[k++ % 5]; }
int main(void)
{
    struct tdg_pair_cost c = tdg_pair_cost(begin, end, 5);
    k = 0;
    struct tdg_pair_cost same = tdg_pair_cost(begin, begin, 3);
    printf("%llu %llu %llu %d\n", (unsigned long long)c.min, (unsigned long long)c.finest,
           (unsigned long long)c.step, same.step == UINT64_MAX && same.finest == UINT64_MAX);
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("pairs");
    cc.compile(&toolchain::CompileJob {
        sources: vec![source],
        output: exe.clone(),
        cflags: vec![
            "-O1".into(),
            "-Wall".into(),
            "-Wextra".into(),
            "-Werror".into(),
        ],
        include_dirs: vec![dir.path().to_path_buf()],
        ..Default::default()
    })
    .unwrap();
    let out = std::process::Command::new(&exe).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "52 52 26 1");
}
