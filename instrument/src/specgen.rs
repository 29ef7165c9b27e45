//! `tdg spec-from-profile`: the user's spec with the `Macro` defaults of the
//! profiled parameters set to the dominant call context.
//!
//! The spec text is edited in place through the AST's spans rather than
//! re-emitted, so the user's comments, layout and reference body survive
//! byte for byte; only the default values change.

use crate::contexts::ContextsFile;
use crate::report::Report;
use spec_lang::ast::{Expr, InitValue, Spec};
use std::collections::BTreeMap;

/// A parameter value to put into the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextParam {
    pub name: String,
    /// As C source (`4096`, `18446744073709551615u`).
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecEdit {
    /// The new spec text.
    pub text: String,
    /// Routine parameter name to the macro that sets it (`-D NAME=...`).
    pub macros: BTreeMap<String, String>,
    /// Things the user should know (a parameter left alone and why).
    pub notes: Vec<String>,
}

impl SpecEdit {
    /// The `-D` overrides that select `values` (param name to value text).
    pub fn defines_for(&self, values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        values
            .iter()
            .filter_map(|(p, v)| self.macros.get(p).map(|m| (m.clone(), v.clone())))
            .collect()
    }
}

/// Macro name for a parameter that had none: upper-case and prefixed so it
/// cannot collide with the parameter itself (`N` -> `TDG_N`).
pub fn macro_name_for(param: &str) -> String {
    format!("TDG_{}", param.to_uppercase())
}

/// What a profile says about how the routine ran, beyond its parameters:
/// the timer settings that reproduce it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RanAs {
    /// The definition's address modulo 4096 in the application (when an
    /// interposer recorded it): `code_offset`.
    pub code_offset: Option<u64>,
    /// The threads the process ran with at the context's calls: `threads`.
    pub threads: Option<u16>,
}

/// Rewrites `src` (the text `spec` was parsed from) so each parameter of
/// `context` defaults to its value, the routine's code is placed at
/// `ran.code_offset` and runs on `ran.threads` threads, unless the spec
/// already says otherwise (then a note says what the application did).
pub fn apply_context(spec: &Spec, src: &str, context: &[ContextParam], ran: RanAs) -> SpecEdit {
    let mut plan = EditPlan::default();
    for cp in context {
        plan.param(spec, src, cp);
    }
    // A prototype-only spec gets an init clause of what the profile knows.
    if !plan.new_init.is_empty() {
        let sep = break_before_appending(src);
        let body = plan
            .new_init
            .iter()
            .map(|e| format!("  {e}\n"))
            .collect::<String>();
        plan.edits
            .push((src.len(), src.len(), format!("{sep}init={{\n{body}}};\n")));
    }
    let (timer, timer_notes) = timer_edit(spec, src, ran);
    plan.edits.extend(timer);
    plan.notes.extend(timer_notes);
    plan.notes.extend(unset_note(spec, context));
    SpecEdit {
        text: apply_edits(src, plan.edits),
        macros: plan.macros,
        notes: plan.notes,
    }
}

/// The edits [`apply_context`] makes to the spec's text, gathered before
/// any is applied (their spans are the parsed text's).
#[derive(Default)]
struct EditPlan {
    /// Byte range of the source and its replacement.
    edits: Vec<(usize, usize, String)>,
    macros: BTreeMap<String, String>,
    notes: Vec<String>,
    /// Entries of an init clause the spec lacks.
    new_init: Vec<String>,
}

impl EditPlan {
    /// Makes parameter `cp` default to its profiled value: a `Macro`'s
    /// default replaced, a literal made a `Macro`, a missing entry added; a
    /// derived value is left alone with a note.
    fn param(&mut self, spec: &Spec, src: &str, cp: &ContextParam) {
        if !spec.routine.params.iter().any(|p| p.name.name == cp.name) {
            self.notes.push(format!(
                "`{}` is recorded in the profile but is not a parameter of `{}`; left out",
                cp.name, spec.routine.name.name
            ));
            return;
        }
        let Some(init) = spec.init.iter().find(|i| i.name.name == cp.name) else {
            let m = macro_name_for(&cp.name);
            let entry = format!("{}=Macro({m}, {});", cp.name, cp.value);
            match spec.init.first() {
                Some(first) => {
                    let at = first.span.start;
                    self.edits.push((at, at, format!("{entry} ")));
                }
                None => self.new_init.push(entry),
            }
            self.macros.insert(cp.name.clone(), m);
            return;
        };
        match &init.value {
            InitValue::Scalar(Expr::Macro { name, default, .. }) => {
                let s = default.span();
                self.edits.push((s.start, s.end, cp.value.clone()));
                self.macros.insert(cp.name.clone(), name.name.clone());
            }
            InitValue::Scalar(e @ (Expr::Int(..) | Expr::Float(..))) => {
                let s = e.span();
                let m = macro_name_for(&cp.name);
                self.edits
                    .push((s.start, s.end, format!("Macro({m}, {})", cp.value)));
                self.macros.insert(cp.name.clone(), m);
            }
            _ => {
                let s = init.span;
                let text = src.get(s.start..s.end).unwrap_or("").trim();
                self.notes.push(format!(
                    "`{text}` is derived from other values, not set from the profile (the profile saw {}={})",
                    cp.name, cp.value
                ));
            }
        }
    }
}

/// The note naming the parameters neither the spec nor the profile gives.
fn unset_note(spec: &Spec, context: &[ContextParam]) -> Option<String> {
    let unset: Vec<String> = spec
        .routine
        .params
        .iter()
        .map(|p| p.name.name.as_str())
        .filter(|n| spec.init_for(n).is_none() && !context.iter().any(|c| c.name == *n))
        .map(|n| format!("`{n}`"))
        .collect();
    (!unset.is_empty()).then(|| format!(
        "the profile does not give {}: add them to init before building a driver (`tdg check` lists what is missing)",
        unset.join(", ")
    ))
}

/// `src` with the `edits` applied, the last first so earlier spans stay
/// valid.
fn apply_edits(src: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut text = src.to_string();
    for (start, end, new) in edits {
        if start <= end && end <= text.len() {
            text.replace_range(start..end, &new);
        }
    }
    text
}

/// What goes before a clause appended to `src`, so it starts a line.
fn break_before_appending(src: &str) -> &'static str {
    if src.ends_with('\n') || src.is_empty() {
        ""
    } else {
        "\n"
    }
}

/// The timer settings the application's run asks for that the spec does not
/// have: `code_offset=N;` (the routine's address modulo 4096 there) and
/// `threads=N;` (above 1: one thread is the driver's default). A note for
/// each the spec sets to something else (the spec's choice stands).
fn timer_settings(spec: &Spec, ran: RanAs, notes: &mut Vec<String>) -> Vec<String> {
    let routine = &spec.routine.name.name;
    let timer = spec.timer.as_ref();
    let mut add = Vec::new();
    if let Some(offset) = ran.code_offset {
        let setting = format!("code_offset={offset};");
        match timer.and_then(|t| t.code_offset) {
            Some(o) if u64::from(o.get()) == offset => {}
            Some(o) => notes.push(format!(
                "the spec places `{routine}` at page offset {o}; the application had it at {offset} (`{setting}` in timer={{...}} times it as placed there)"
            )),
            None => add.push(setting),
        }
    }
    if let Some(threads) = ran.threads {
        let setting = format!("threads={threads};");
        match timer.and_then(|t| t.threads) {
            Some(n) if n == u32::from(threads) => {}
            Some(n) => notes.push(format!(
                "the spec runs `{routine}` on {n} thread(s); the application ran with {threads} (`{setting}` in timer={{...}}, or `--threads {threads}`, times it so)"
            )),
            None if threads > 1 => add.push(setting),
            None => {}
        }
    }
    add
}

/// The edit that adds the application's timer settings ([`timer_settings`])
/// inside the spec's timer clause, or as a new clause (`None` when there is
/// nothing to add), and the notes for the user.
fn timer_edit(spec: &Spec, src: &str, ran: RanAs) -> (Option<(usize, usize, String)>, Vec<String>) {
    let mut notes = Vec::new();
    let add = timer_settings(spec, ran, &mut notes);
    if add.is_empty() {
        return (None, notes);
    }
    let settings = add.join(" ");
    let edit = match &spec.timer {
        None => {
            let sep = break_before_appending(src);
            Some((
                src.len(),
                src.len(),
                format!("{sep}timer={{ {settings} }};\n"),
            ))
        }
        // Inside the clause, before its closing brace.
        Some(timer) => match src
            .get(timer.span.start..timer.span.end)
            .and_then(|c| c.rfind('}'))
        {
            Some(close) => {
                let at = timer.span.start + close;
                Some((at, at, format!("{settings} ")))
            }
            None => {
                notes.push(format!(
                    "add `{settings}` to timer={{...}} to time `{}` as the application ran it",
                    spec.routine.name.name
                ));
                None
            }
        },
    };
    (edit, notes)
}

/// A profile turned into an edited spec and its contexts file.
#[derive(Debug, Clone)]
pub struct Derived {
    pub edit: SpecEdit,
    /// `edit.text` parsed and checked.
    pub spec: spec_lang::CheckedSpec,
    pub contexts: ContextsFile,
    /// Label of the context that became the default.
    pub chosen: String,
}

#[derive(Debug, thiserror::Error)]
pub enum DeriveError {
    #[error("the profile has {count} contexts; --rank must be 1..={count}")]
    NoRank { count: usize },
    #[error("internal error: the edited spec no longer parses:\n{0}")]
    Reparse(String),
}

/// Sets the context of `rank` as the default in the spec text `src`
/// (parsed as `spec`, from `file`) and lists every context with the `-D`
/// overrides that select it in the edited spec.
pub fn derive(
    spec: &Spec,
    src: &str,
    file: &str,
    report: &Report,
    rank: usize,
    spec_out: Option<String>,
) -> Result<Derived, DeriveError> {
    let chosen = report
        .contexts
        .iter()
        .find(|c| c.rank == rank)
        .ok_or(DeriveError::NoRank {
            count: report.contexts.len(),
        })?;
    let params: Vec<ContextParam> = chosen
        .values
        .iter()
        .map(|v| ContextParam {
            name: v.name.clone(),
            value: v.display.clone(),
        })
        .collect();
    let ran = RanAs {
        code_offset: report.code_page_offset,
        threads: chosen.threads,
    };
    let edit = apply_context(spec, src, &params, ran);
    // Still a prototype where the profile could not fill in a value.
    let edited = spec_lang::check_source(&edit.text, file, &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .map_err(|d| DeriveError::Reparse(d.to_string()))?;
    if edited.routine != spec.routine {
        return Err(DeriveError::Reparse("the routine changed".into()));
    }
    let contexts = ContextsFile::from_report(report, spec_out, |c| {
        let values: BTreeMap<String, String> = c
            .values
            .iter()
            .map(|v| (v.name.clone(), v.display.clone()))
            .collect();
        edit.defines_for(&values)
    });
    Ok(Derived {
        chosen: chosen.label(),
        edit,
        spec: edited,
        contexts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "// keep me\nroutine=unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len);\ninit={\n  crc=0;\n  len=Macro(LEN, 100);\n  buf=Vector(unsigned char, RANDOM, align(64), len);\n};\n";

    fn offset(o: u64) -> RanAs {
        RanAs {
            code_offset: Some(o),
            threads: None,
        }
    }

    fn cp(name: &str, v: &str) -> ContextParam {
        ContextParam {
            name: name.into(),
            value: v.into(),
        }
    }

    #[test]
    fn sets_macro_defaults_and_wraps_literals() {
        let spec = spec_lang::check_source(SRC, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(
            &spec,
            SRC,
            &[cp("crc", "7"), cp("len", "32768")],
            RanAs::default(),
        );
        assert!(e.text.starts_with("// keep me\n"));
        assert!(e.text.contains("len=Macro(LEN, 32768);"), "{}", e.text);
        assert!(e.text.contains("crc=Macro(TDG_CRC, 7);"), "{}", e.text);
        let back = spec_lang::check_source(&e.text, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        assert_eq!(back.routine, spec.routine);
        assert_eq!(e.macros["len"], "LEN");
        let d = e.defines_for(
            &[("len".to_string(), "64".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(d["LEN"], "64");
        assert!(e.notes.is_empty());
    }

    #[test]
    fn the_application_code_offset_goes_into_the_timer_clause_unless_the_spec_sets_one() {
        let spec = spec_lang::check_source(SRC, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(&spec, SRC, &[], offset(1616));
        assert!(
            e.text.ends_with("};\ntimer={ code_offset=1616; };\n"),
            "{}",
            e.text
        );
        let back = spec_lang::check_source(&e.text, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        assert_eq!(
            back.spec.timer.unwrap().code_offset,
            spec_lang::ast::CodeOffset::new(1616)
        );

        let timed = format!("{SRC}timer={{ samples=9; }};\n");
        let spec = spec_lang::check_source(&timed, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(&spec, &timed, &[], offset(48));
        let back = spec_lang::check_source(&e.text, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let t = back.spec.timer.unwrap();
        assert_eq!(
            (t.samples, t.code_offset),
            (Some(9), spec_lang::ast::CodeOffset::new(48)),
            "{}",
            e.text
        );

        let placed = format!("{SRC}timer={{ code_offset=16; }};\n");
        let spec = spec_lang::check_source(&placed, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(&spec, &placed, &[], offset(48));
        assert_eq!(e.text, placed);
        assert!(e.notes[0].contains("had it at 48"), "{:?}", e.notes);
    }

    /// A context that ran on several threads is timed on as many: the
    /// setting joins the code offset in one timer clause; one thread is the
    /// driver's default and adds nothing; a spec that says otherwise keeps
    /// its choice and is told what the application did.
    #[test]
    fn the_applications_thread_count_goes_into_the_timer_clause() {
        let spec = spec_lang::check_source(SRC, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let ran = |threads| RanAs {
            code_offset: Some(64),
            threads: Some(threads),
        };
        let e = apply_context(&spec, SRC, &[], ran(2));
        assert!(
            e.text.ends_with("timer={ code_offset=64; threads=2; };\n"),
            "{}",
            e.text
        );
        let back = spec_lang::check_source(&e.text, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        assert_eq!(back.spec.timer.unwrap().threads, Some(2));
        let e = apply_context(&spec, SRC, &[], ran(1));
        assert!(
            e.text.ends_with("timer={ code_offset=64; };\n"),
            "{}",
            e.text
        );
        let four = format!("{SRC}timer={{ threads=4; }};\n");
        let spec = spec_lang::check_source(&four, "crc.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(&spec, &four, &[], ran(2));
        assert!(
            e.text.ends_with("timer={ threads=4; code_offset=64; };\n"),
            "{}",
            e.text
        );
        assert!(
            e.notes.iter().any(|n| n.contains("ran with 2")),
            "{:?}",
            e.notes
        );
    }

    #[test]
    fn a_prototype_gets_an_init_of_what_the_profile_knows() {
        let src = "include=\"typedef struct EState EState;\";\nroutine=long f(EState* s, long n, int k);\n";
        let spec = spec_lang::check_source(src, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        let e = apply_context(
            &spec,
            src,
            &[cp("n", "4096"), cp("k", "3")],
            RanAs::default(),
        );
        assert!(e.text.starts_with(src), "{}", e.text);
        assert!(
            e.text
                .ends_with("init={\n  n=Macro(TDG_N, 4096);\n  k=Macro(TDG_K, 3);\n};\n"),
            "{}",
            e.text
        );
        assert_eq!(e.macros["n"], "TDG_N");
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
        assert!(e.notes[0].contains("`s`"), "{:?}", e.notes);
        let back = spec_lang::check_source(&e.text, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        assert_eq!(back.routine, spec.routine);
        assert_eq!(back.init.len(), 2);
    }

    #[test]
    fn the_outputs_a_spec_declares_survive_byte_for_byte() {
        let src = "include=\"#include \\\"bzlib_private.h\\\"\";\nroutine=void f(EState* s, int k);\nreturns(s->ptr[s->nblock * k], s->origPtr); // sorted order, rotation\n";
        let spec = spec_lang::check_source(src, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        let e = apply_context(&spec, src, &[cp("k", "3")], RanAs::default());
        assert!(e.text.starts_with(src), "{}", e.text);
        let back = spec_lang::check_source(&e.text, "p.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
            .unwrap();
        assert_eq!(back.returns, spec.returns);
        assert_eq!(back.returns[0].text(), "s->ptr");
    }

    #[test]
    fn derived_values_and_unknown_names_are_noted_not_changed() {
        let src = "routine=void f(const int M, const int lda, double* A);\ninit={ M=Macro(MS, 10); lda=M; A=Matrix(double, lda, M, RANDOM, _); };\n";
        let spec = spec_lang::check_source(src, "f.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
        let e = apply_context(
            &spec,
            src,
            &[cp("M", "20"), cp("lda", "32"), cp("q", "1")],
            RanAs::default(),
        );
        assert!(e.text.contains("M=Macro(MS, 20)"));
        assert!(e.text.contains("lda=M;"));
        assert_eq!(e.notes.len(), 2, "{:?}", e.notes);
        spec_lang::check_source(&e.text, "f.spec", &[])
            .and_then(|c| c.for_use(spec_lang::Use::Driver))
            .unwrap();
    }
}
