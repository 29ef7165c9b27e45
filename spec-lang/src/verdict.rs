//! `tdg check`'s verdict on one spec file: for each [`Use`], whether the
//! spec serves it and what it lacks, which uses were asked for (and so fail
//! the file), the errors to show and the one-line summary. Data only; the
//! binary prints it.

use crate::checked::{CheckedSpec, Use};
use crate::diag::{Diagnostic, Diagnostics};
use std::collections::BTreeMap;
use std::path::Path;

/// What one file's check found for one use.
#[derive(Debug, serde::Serialize)]
pub struct UseVerdict {
    #[serde(rename = "use")]
    pub for_use: Use,
    pub ok: bool,
    /// Asked for, by `--for` or by default: only these fail the file.
    pub asked: bool,
    pub diagnostics: Vec<Diagnostic>,
}

/// One file's findings.
#[derive(Debug, serde::Serialize)]
pub struct FileVerdict {
    pub file: String,
    pub ok: bool,
    pub summary: Option<String>,
    pub uses: Vec<UseVerdict>,
    /// The errors of the failing uses asked for and the warnings, in the
    /// order of the source.
    pub diagnostics: Vec<Diagnostic>,
    /// The errors to show, located in the file's text.
    #[serde(skip)]
    pub shown: Option<Diagnostics>,
    #[serde(skip)]
    pub warnings: Option<Diagnostics>,
}

/// Reads and checks the spec file at `path` ([`verdict`]).
pub fn check_file(
    path: &Path,
    overrides: &BTreeMap<String, f64>,
    asked: &[Use],
    format_bytes: fn(u64) -> String,
) -> FileVerdict {
    let loaded = crate::load(path, &[]);
    verdict(
        &path.display().to_string(),
        loaded,
        overrides,
        asked,
        format_bytes,
    )
}

/// The verdict on `file`, as loaded: with `-D` `overrides` the driver's
/// facts are resolved again under them. `asked` empty means every use the
/// spec serves, so a library routine's prototype-only spec passes for its
/// shims; -D values mean something only to a driver, so they ask for it;
/// a spec that serves no use fails for all of them. `format_bytes` prints
/// the operands' total size in the summary (the units are the caller's).
pub fn verdict(
    file: &str,
    loaded: Result<CheckedSpec, Diagnostics>,
    overrides: &BTreeMap<String, f64>,
    asked: &[Use],
    format_bytes: fn(u64) -> String,
) -> FileVerdict {
    let file = file.to_string();
    let spec = match loaded {
        Ok(s) => s,
        Err(d) => return FileVerdict::unparsed(file, d, asked),
    };
    let driver = if overrides.is_empty() {
        spec.require(Use::Driver).map(|()| spec.clone())
    } else {
        spec.under(overrides)
    };
    let uses = use_verdicts(&spec, &driver, overrides, asked);
    let served_any = uses.iter().any(|u| u.ok);
    let ok = uses.iter().all(|u| u.ok || !u.asked);
    let errors = asked_errors(&uses);
    let warnings = driver
        .as_ref()
        .ok()
        .map(|c| c.warnings.clone())
        .filter(|w| !w.items.is_empty());
    let summary = match &driver {
        Ok(checked) => Some(driver_summary(checked, format_bytes)),
        Err(_) if served_any => Some(signature_summary(&spec)),
        Err(_) => None,
    };
    let shown = (!errors.is_empty()).then(|| Diagnostics::new(&file, spec.source(), errors));
    let mut diagnostics: Vec<Diagnostic> = warnings
        .iter()
        .flat_map(|w| w.items.iter().cloned())
        .chain(shown.iter().flat_map(|d| d.items.iter().cloned()))
        .collect();
    diagnostics.sort_by_key(|d| d.span.map(|s| s.start));
    FileVerdict {
        file,
        ok,
        summary,
        uses,
        diagnostics,
        shown,
        warnings,
    }
}

/// Whether the spec serves each use (the driver's under the overrides
/// already applied: `driver`), and which were asked for.
fn use_verdicts(
    spec: &CheckedSpec,
    driver: &Result<CheckedSpec, Diagnostics>,
    overrides: &BTreeMap<String, f64>,
    asked: &[Use],
) -> Vec<UseVerdict> {
    let mut uses: Vec<UseVerdict> = Use::ALL
        .iter()
        .map(|&u| {
            let outcome = match u {
                Use::Driver => driver.as_ref().map(|_| ()).map_err(|d| d.items.clone()),
                other => spec.require(other).map_err(|d| d.items),
            };
            UseVerdict {
                for_use: u,
                ok: outcome.is_ok(),
                asked: false,
                diagnostics: outcome.err().unwrap_or_default(),
            }
        })
        .collect();
    let served_any = uses.iter().any(|u| u.ok);
    for u in &mut uses {
        u.asked = if asked.is_empty() {
            u.ok || !served_any || (u.for_use == Use::Driver && !overrides.is_empty())
        } else {
            asked.contains(&u.for_use)
        };
    }
    uses
}

/// The errors of the failing uses asked for, each once (the uses share
/// most checks).
fn asked_errors(uses: &[UseVerdict]) -> Vec<Diagnostic> {
    let mut errors: Vec<Diagnostic> = Vec::new();
    for u in uses.iter().filter(|u| u.asked && !u.ok) {
        for d in &u.diagnostics {
            if !errors
                .iter()
                .any(|e| e.message == d.message && e.span == d.span)
            {
                errors.push(d.clone());
            }
        }
    }
    errors
}

impl FileVerdict {
    /// A file that does not parse: every use fails with its errors.
    fn unparsed(file: String, d: Diagnostics, asked: &[Use]) -> FileVerdict {
        FileVerdict {
            file,
            ok: false,
            summary: None,
            uses: Use::ALL
                .iter()
                .map(|&u| UseVerdict {
                    for_use: u,
                    ok: false,
                    asked: asked.is_empty() || asked.contains(&u),
                    diagnostics: d.items.clone(),
                })
                .collect(),
            diagnostics: d.items.clone(),
            shown: Some(d),
            warnings: None,
        }
    }

    /// `f.spec: ok for profile, checkpoint (routine f, 2 parameters)`, then
    /// a line for each use the spec does not serve and was not asked for.
    /// Empty when the spec serves no use (its errors say it all).
    pub fn line(&self) -> String {
        let names = |pick: &dyn Fn(&UseVerdict) -> bool| {
            self.uses
                .iter()
                .filter(|u| pick(u))
                .map(|u| u.for_use.name())
                .collect::<Vec<_>>()
        };
        let served = names(&|u| u.ok);
        if served.is_empty() {
            return String::new();
        }
        let mut s = format!("{}: ", self.file);
        if !self.ok {
            let failing = names(&|u| u.asked && !u.ok);
            s.push_str(&format!("FAILS for {}; ", failing.join(", ")));
        }
        s.push_str(&format!("ok for {}", served.join(", ")));
        if let Some(summary) = &self.summary {
            s.push_str(&format!(" ({summary})"));
        }
        s.push('\n');
        for u in self.uses.iter().filter(|u| !u.ok && !u.asked) {
            let first = u.diagnostics.first().map_or("", |d| d.message.as_str());
            let more = match u.diagnostics.len() {
                0 | 1 => "where".to_string(),
                n => format!("{n} errors"),
            };
            s.push_str(&format!(
                "  not for a {}: {first} (`tdg check --for {} {}` shows {more})\n",
                u.for_use.name(),
                u.for_use.name(),
                self.file,
            ));
        }
        s
    }
}

/// `routine f, 3 parameters, 2 arrays totalling 1.5 MiB, 256 flop per call`.
fn driver_summary(c: &CheckedSpec, format_bytes: fn(u64) -> String) -> String {
    let arrays = c.operands.len();
    let bytes = c
        .operands
        .iter()
        .fold(0u64, |acc, o| acc.saturating_add(o.bytes().unwrap_or(0)));
    let mut s = format!(
        "routine {}, {} parameter{}, {arrays} array{} totalling {}",
        c.routine.name.name,
        c.routine.params.len(),
        plural(c.routine.params.len()),
        plural(arrays),
        format_bytes(bytes)
    );
    if let Some(f) = c.flop_count() {
        s.push_str(&format!(", {f} flop per call"));
    }
    s
}

/// `routine f, 3 parameters`: a spec that no driver is built from.
fn signature_summary(spec: &crate::Spec) -> String {
    let n = spec.routine.params.len();
    format!(
        "routine {}, {n} parameter{}",
        spec.routine.name.name,
        plural(n)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: u64) -> String {
        format!("{b} bytes")
    }

    fn check(src: &str, overrides: &[(&str, f64)], asked: &[Use]) -> FileVerdict {
        let overrides = overrides.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let loaded = crate::check_source(src, "k.spec", &[]);
        verdict("k.spec", loaded, &overrides, asked, bytes)
    }

    fn served(v: &FileVerdict) -> Vec<(Use, bool, bool)> {
        v.uses.iter().map(|u| (u.for_use, u.ok, u.asked)).collect()
    }

    const DRIVER: &str = "routine=void scale(const int N, double* X);\ninit={ N=Macro(NS, 8); X=Vector(double, RANDOM, _, N); };\nreturns(X);\nflop=\"N\";\n";
    /// A library routine's prototype: shims can wrap it, no driver can fill `X`.
    const PROTOTYPE: &str = "routine=void scale(const int N, double* X);\n";

    #[test]
    fn a_full_spec_serves_every_use_and_sums_its_operands() {
        let v = check(DRIVER, &[], &[]);
        assert!(v.ok && v.shown.is_none());
        assert!(served(&v).iter().all(|&(_, ok, asked)| ok && asked));
        assert_eq!(
            v.line(),
            "k.spec: ok for driver, profile, checkpoint (routine scale, 2 parameters, 1 array totalling 64 bytes, 8 flop per call)\n"
        );
        let under = check(DRIVER, &[("NS", 100.0)], &[]);
        assert!(under
            .summary
            .unwrap()
            .contains("totalling 800 bytes, 100 flop"));
    }

    #[test]
    fn a_prototype_passes_for_what_it_serves_and_says_what_it_lacks_for_the_rest() {
        let v = check(PROTOTYPE, &[], &[]);
        assert!(v.ok, "{:?}", v.diagnostics);
        let driver = &v.uses[0];
        assert_eq!(
            (driver.for_use, driver.ok, driver.asked),
            (Use::Driver, false, false)
        );
        assert!(!driver.diagnostics.is_empty());
        let line = v.line();
        assert!(line.starts_with("k.spec: ok for profile"), "{line}");
        assert!(
            line.contains("(routine scale, 2 parameters)\n  not for a driver: "),
            "{line}"
        );
        assert!(
            line.contains("(`tdg check --for driver k.spec` shows"),
            "{line}"
        );

        // Asked for a driver (by --for, or by -D values), the same file fails.
        for v in [
            check(PROTOTYPE, &[], &[Use::Driver]),
            check(PROTOTYPE, &[("NS", 4.0)], &[]),
        ] {
            assert!(!v.ok);
            assert!(v
                .line()
                .starts_with("k.spec: FAILS for driver; ok for profile"));
            let shown = v.shown.as_ref().expect("the driver's errors are shown");
            assert_eq!(shown.items, v.uses[0].diagnostics);
        }
    }

    #[test]
    fn a_file_that_does_not_parse_fails_every_use_and_prints_no_summary() {
        let v = check("routine=void f(int n)", &[], &[Use::Profile]);
        assert!(!v.ok && v.summary.is_none() && v.line().is_empty());
        let asked: Vec<bool> = v.uses.iter().map(|u| u.asked).collect();
        assert_eq!(asked, [false, true, false]);
        assert!(v.uses.iter().all(|u| !u.ok && !u.diagnostics.is_empty()));
        assert_eq!(v.shown.unwrap().items, v.diagnostics);
    }
}
