//! The control-pipe reader every restored copy runs (tdg_checkpoint.c's
//! read_control and parse_control, exposed by TDG_CONTROL_FUZZ) on garbage
//! and on the edges of what it accepts, built with AddressSanitizer and
//! UndefinedBehaviorSanitizer: no overflow, no undefined behaviour, no hang,
//! and a verdict (follow or refuse) for every input. The fuzz target
//! `control` (fuzz/) runs the same code under libFuzzer.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const HARNESS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int tdg_control_fuzz(const unsigned char *data, unsigned long size);
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        long n;
        unsigned char *buf;
        if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0)
            return 2;
        rewind(f);
        buf = malloc((size_t)n + 1);
        if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
            return 2;
        fclose(f);
        printf("%d\n", tdg_control_fuzz(buf, (unsigned long)n));
        free(buf);
    }
    return 0;
}
"#;

/// MAX_SAMPLES in tdg_checkpoint.c.
const MAX_SAMPLES: usize = 1_000_000;

#[test]
fn the_control_reader_survives_garbage_and_its_edges() {
    let _load = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let c = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::write(dir.path().join("harness.c"), HARNESS).unwrap();
    let exe = dir.path().join("harness");
    let out = Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-DTDG_CONTROL_FUZZ",
            "-I",
        ])
        .arg(c.join("../c-timing/c"))
        .arg(dir.path().join("harness.c"))
        .arg(c.join("c/tdg_checkpoint.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // (name, bytes, expected verdict: Some(true) followed, Some(false)
    // refused, None either)
    let mut inputs: Vec<(String, Vec<u8>, Option<bool>)> = Vec::new();
    let schedule = |n: usize, k: &str| format!("schedule={}\n", vec![k; n].join(","));
    let mut add = |name: &str, bytes: Vec<u8>, want: Option<bool>| {
        inputs.push((name.to_string(), bytes, want))
    };
    add("empty", Vec::new(), Some(true));
    add(
        "plain",
        b"tsc_ghz=2.5\nschedule=0,0,0\n".to_vec(),
        Some(true),
    );
    add(
        "most samples",
        schedule(MAX_SAMPLES, "0").into_bytes(),
        Some(true),
    );
    add(
        "too many samples",
        schedule(MAX_SAMPLES + 1, "0").into_bytes(),
        Some(false),
    );
    let candidates: String = (0..64)
        .map(|i| format!("candidate=/tmp/c{i}.so\n"))
        .collect();
    add(
        "64 candidates",
        format!("{candidates}{}", schedule(64, "64")).into_bytes(),
        Some(true),
    );
    add(
        "65 candidates",
        format!("{candidates}candidate=/tmp/x.so\n").into_bytes(),
        Some(false),
    );
    add(
        "unlisted candidate",
        b"schedule=0,1\n".to_vec(),
        Some(false),
    );
    add(
        "past the last candidate",
        b"schedule=65\n".to_vec(),
        Some(false),
    );
    add(
        "overflow",
        b"schedule=99999999999999999999999\n".to_vec(),
        Some(false),
    );
    add("negative", b"schedule=-1\n".to_vec(), Some(false));
    add("sign", b"schedule=+1\n".to_vec(), Some(false));
    add("empty schedule", b"schedule=\n".to_vec(), Some(false));
    add("commas", b"schedule=,,\n".to_vec(), Some(false));
    add(
        "two schedules",
        b"schedule=0\nschedule=0\n".to_vec(),
        Some(false),
    );
    let long = format!("outputs=/{}\n", "x".repeat(5000));
    add("long outputs path", long.into_bytes(), Some(false));
    add(
        "longer than accepted",
        vec![b'a'; 64 * (4096 + 16) + 4 * MAX_SAMPLES + 4096 + 1],
        Some(false),
    );
    add(
        "NUL bytes",
        b"schedule=0\0,1\ncandidate=\0\n".to_vec(),
        None,
    );
    add("no newline", b"schedule=0,0".to_vec(), Some(true));
    // Deterministic garbage: random bytes, and random lines of the
    // reader's own words.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let words: [&[u8]; 8] = [
        b"schedule=",
        b"candidate=",
        b"outputs=",
        b"tsc_ghz=",
        b",",
        b"\n",
        b"7",
        b"64",
    ];
    for i in 0..200 {
        let len = (next() % 70_000) as usize;
        let bytes: Vec<u8> = if i % 2 == 0 {
            (0..len).map(|_| next() as u8).collect()
        } else {
            let mut v = Vec::new();
            while v.len() < len {
                v.extend_from_slice(words[(next() % 8) as usize]);
            }
            v
        };
        add(&format!("garbage {i}"), bytes, None);
    }

    let paths: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, (_, bytes, _))| {
            let p = dir.path().join(format!("in{i}"));
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect();
    let started = Instant::now();
    let out = Command::new(&exe).args(&paths).output().unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "the reader crashed or a sanitizer stopped it:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(120), "took {took:?}");
    let verdicts: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(verdicts.len(), inputs.len());
    for ((name, _, want), got) in inputs.iter().zip(&verdicts) {
        if let Some(follow) = want {
            assert_eq!(*got == "0", *follow, "{name}: verdict {got}");
        }
    }
}
