//! Fuzz targets for every file tdg reads back. Each takes the bytes of one
//! file and does with them what tdg does: reads the file through the same
//! function the command uses (through a real file where the reader takes a
//! path), then hands what it read to the code that consumes it (reports,
//! plots, the driver model, the search's results). Whatever the bytes, that
//! must end in a value or an error: no panic, no hang, no unbounded
//! allocation. Where a reader accepts a file, its writer must write it back
//! unchanged.
//!
//! Each returns whether the reader accepted the file: the committed seeds
//! made from real files must be accepted, so they keep reaching the code
//! behind the reader.
//!
//! The libFuzzer binaries (`fuzz_targets/`, feature `libfuzzer`) call these
//! functions; `scripts/fuzz` builds and runs them, and `tests/seeds.rs`
//! replays the committed seeds (`seeds/TARGET/`) through them in the
//! ordinary test suite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod campaign;
mod checkpoint_files;
mod driver_files;
mod profile_files;

pub use campaign::{campaign_manifest, campaign_result, tune_log};
pub use checkpoint_files::{capture_info, census, image_manifest};
pub use driver_files::{kept_driver, probe_cache};
pub use profile_files::{contexts, profile};

/// A target: the bytes of one file in, whether its reader accepted them out.
pub type Target = fn(&[u8]) -> bool;

/// Every target, by the name of its binary and seed directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("spec", spec),
    ("profile", profile),
    ("contexts", contexts),
    ("capture_info", capture_info),
    ("image_manifest", image_manifest),
    ("census", census),
    ("probe_cache", probe_cache),
    ("kept_driver", kept_driver),
    ("campaign_manifest", campaign_manifest),
    ("campaign_result", campaign_result),
    ("tune_log", tune_log),
];

/// A spec file: parse, check, evaluate and format must not panic, every
/// error must render, and whatever parses must survive a format/parse round
/// trip (both the canonical layout and the layout-keeping one).
pub fn spec(data: &[u8]) -> bool {
    let Ok(src) = std::str::from_utf8(data) else {
        return false;
    };
    match spec_lang::parse(src, "fuzz.spec") {
        Ok(spec) => {
            if let Err(d) = spec_lang::check(&spec, src, "fuzz.spec") {
                assert!(!d.items.is_empty());
                let _ = d.to_string();
            }
            let _ = spec_lang::eval::typed_env(&spec, &BTreeMap::new());
            let _ = spec_lang::eval::flop_count(&spec, &BTreeMap::new());
            let text = spec_lang::format(&spec);
            match spec_lang::parse(&text, "formatted.spec") {
                Ok(back) => assert_eq!(back, spec, "round trip changed the spec:\n{text}"),
                Err(d) => panic!("formatted spec does not parse:\n{d}\n---\n{text}"),
            }
            let kept = spec_lang::format_source(src, "fuzz.spec").expect("parsed once");
            assert_eq!(spec_lang::parse(&kept, "kept.spec").ok(), Some(spec));
            true
        }
        Err(d) => {
            assert!(!d.items.is_empty());
            let _ = d.to_string();
            false
        }
    }
}

/// A private directory for the targets whose reader takes a path, made once
/// per process (a fuzzer runs millions of inputs in one process); in memory
/// where /dev/shm is, since every input is written, read and removed.
fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let builder = tempfile::Builder::new().prefix("tdg-fuzz-").clone();
        builder
            .tempdir_in("/dev/shm")
            .or_else(|_| builder.tempdir())
            .expect("a scratch directory for the fuzz targets")
    })
    .path()
}

/// A fresh empty subdirectory `name` of the scratch directory.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch subdirectory");
    dir
}

/// The example spec the driver-side targets build models for: a dot
/// product with flushed operands, so flush sizes and cache levels matter.
fn dot_spec() -> &'static spec_lang::Spec {
    static SPEC: OnceLock<spec_lang::Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        spec_lang::parse_and_check(include_str!("../../specs/dot.spec"), "specs/dot.spec")
            .expect("specs/dot.spec is valid")
    })
}

/// The tuning example, whose campaigns the kept-driver seeds come from.
fn blocked_gemm_spec() -> &'static spec_lang::Spec {
    static SPEC: OnceLock<spec_lang::Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        spec_lang::parse_and_check(
            include_str!("../../specs/blocked_gemm.spec"),
            "specs/blocked_gemm.spec",
        )
        .expect("specs/blocked_gemm.spec is valid")
    })
}
