//! What `tdg profile` writes and reads back: the `.tdgp` profile (read by
//! `profile report`, `spec-from-profile`, `validate` and when merging the
//! files of a program's processes) and the contexts file (`spec-from-profile`
//! writes it, `run --contexts` reads it).

use instrument::contexts::{self, ContextsFile};
use instrument::format::{self, ValueKind};
use instrument::{report, specgen};

/// A `.tdgp` file: parsed, written back unchanged, merged with itself as
/// the files of two processes are, reported on per routine (table, JSON,
/// the `--svg` timeline), and turned into a spec and a contexts file as
/// `spec-from-profile` does, with a prototype built from the routine's
/// recorded parameters.
pub fn profile(data: &[u8]) -> bool {
    let Ok(profile) = format::parse(data, "fuzz.tdgp") else {
        return false;
    };
    let written = format::to_bytes(&profile);
    let back = format::parse(&written, "written.tdgp").expect("tdg reads what it writes");
    assert_eq!(
        back, profile,
        "a profile changed on its way through the writer"
    );
    let merged = format::merge(vec![profile.clone(), profile.clone()]).expect("two parts");
    assert_eq!(merged.records.len(), 2 * profile.records.len());
    for info in profile.routines.iter().take(4) {
        let opts = report::ReportOptions {
            routine: Some(info.name.clone()),
            early_calls: 4,
        };
        let Ok(rep) = report::build(&profile, &opts) else {
            continue;
        };
        let _ = report::render_table(&rep, 15);
        let _ = ::report::profile_section::timeline_svg(&rep);
        serde_json::to_string(&rep).expect("a report serialises");
        let Some(src) = prototype_of(info) else {
            continue;
        };
        let Ok(spec) = spec_lang::check_source(&src, "fuzz.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        else {
            continue;
        };
        for rank in [1, rep.contexts.len()] {
            if let Ok(derived) = specgen::derive(&spec, &src, "fuzz.spec", &rep, rank, None) {
                let text = derived.contexts.to_json();
                ContextsFile::parse(&text, "derived.json")
                    .expect("a contexts file tdg wrote reads back");
            }
        }
    }
    true
}

/// `routine=void NAME(long a, ...);` for a routine whose names are C
/// identifiers: the spec `tdg profile --spec` would have interposed.
fn prototype_of(info: &format::RoutineInfo) -> Option<String> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.len() < 64
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !ident(&info.name) || !info.values.iter().all(|v| ident(&v.name)) {
        return None;
    }
    let params: Vec<String> = info
        .values
        .iter()
        .map(|v| {
            let ty = match v.kind {
                ValueKind::Signed => "long",
                ValueKind::Unsigned => "unsigned long",
                ValueKind::Pointer => "const double*",
                ValueKind::Double => "double",
            };
            format!("{ty} {}", v.name)
        })
        .collect();
    Some(format!(
        "routine=void {}({});\n",
        info.name,
        params.join(", ")
    ))
}

/// A contexts file: parsed, each of its contexts turned into the driver
/// options `run --contexts` times it with and a model of the example dot
/// spec under them, and the prediction computed and printed from a
/// per-call time taken from the file itself, as a driver's measurement
/// would be.
pub fn contexts(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(file) = ContextsFile::parse(text, "fuzz.contexts.json") else {
        return false;
    };
    let base = driver_gen::RunOptions {
        machine: Some(driver_gen::MachineDefaults::fixed_for_tests()),
        ..Default::default()
    };
    for ctx in file.contexts.iter().take(8) {
        let o = driver_gen::contexts::options_for(&base, ctx, None);
        if let Ok(spec) = crate::fixtures::dot_spec_under(&o.defines) {
            let _ = driver_gen::DriverModel::from_checked(&spec, &o.driver_config());
        }
    }
    for top in [1, 15] {
        let prediction =
            contexts::predict::<()>(&file, top, |c| Ok(c.in_app_min_ns)).expect("no error");
        let _ = contexts::render_prediction(&prediction);
        serde_json::to_string(&prediction).expect("a prediction serialises");
    }
    true
}
