//! Any text: parse, check, evaluate and format must not panic, every error
//! must render, and whatever parses must survive a format/parse round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
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
        }
        Err(d) => {
            assert!(!d.items.is_empty());
            let _ = d.to_string();
        }
    }
});
