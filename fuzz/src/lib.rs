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

mod campaign;
mod checkpoint_files;
mod copies;
mod driver_files;
mod fixtures;
mod profile_files;
mod report_files;

pub use campaign::{campaign_manifest, campaign_result, tune_log};
pub use checkpoint_files::{capture_info, census, image_manifest};
pub use copies::{control, copy_report, forked_report};
pub use driver_files::{kept_driver, probe_cache};
pub use profile_files::{contexts, profile};
pub use report_files::report_input;

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
    ("copy_report", copy_report),
    ("forked_report", forked_report),
    ("control", control),
    ("report_input", report_input),
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
            // Parsed text always checks; each use it does not serve must say
            // why, and the reasons must render.
            let checked = spec_lang::check_source(src, "fuzz.spec", &[]).expect("parsed once");
            for u in spec_lang::Use::ALL {
                if let Err(d) = checked.require(u) {
                    assert!(!d.items.is_empty());
                    let _ = d.to_string();
                }
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
