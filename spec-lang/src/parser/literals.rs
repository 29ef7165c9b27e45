//! Literals inside the parse tree: strings and their escapes, integers,
//! flush sizes, durations and the sampling budget.

use super::grammar::{Built, Rule};
use crate::ast::*;
use crate::diag::Diagnostic;
use pest::iterators::Pair;

/// The single primary (name, call, literal, parenthesised expr) an expression
/// consists of, if it has no operators.
/// `0`, `-1`, `2.5e-3`: a number with any count of unary minus signs and
/// nothing else.
pub(super) fn is_number_literal(p: &Pair<Rule>) -> bool {
    let mut cur = p.clone();
    loop {
        let mut it = cur.clone().into_inner();
        match cur.as_rule() {
            Rule::expr | Rule::term => match (it.next(), it.next()) {
                (Some(only), None) => cur = only,
                _ => return false,
            },
            Rule::unary => match it.find(|q| q.as_rule() != Rule::neg) {
                Some(prim) => cur = prim,
                None => return false,
            },
            Rule::int | Rule::float => return true,
            _ => return false,
        }
    }
}

pub(super) fn sole_primary(p: Pair<Rule>) -> Option<Pair<Rule>> {
    let mut cur = p;
    loop {
        match cur.as_rule() {
            Rule::expr | Rule::term => {
                let mut it = cur.into_inner();
                let first = it.next()?;
                if it.next().is_some() {
                    return None;
                }
                cur = first;
            }
            Rule::unary => {
                let mut it = cur.into_inner();
                let first = it.next()?;
                if first.as_rule() == Rule::neg {
                    return None;
                }
                cur = first;
            }
            _ => return Some(cur),
        }
    }
}

pub(super) fn inner_str<'a>(s: &Pair<'a, Rule>) -> &'a str {
    s.clone()
        .into_inner()
        .next()
        .map(|p| p.as_str())
        .unwrap_or("")
}

/// Resolves string escapes: `\"`, `\\`, `\n`, `\t`; any other `\x` stays as written.
pub(crate) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

pub(super) fn parse_flush_size(s: &str) -> Option<FlushSize> {
    match s.to_ascii_uppercase().as_str() {
        "L1" => return Some(FlushSize::Level(1)),
        "L2" => return Some(FlushSize::Level(2)),
        "L3" => return Some(FlushSize::Level(3)),
        "LLC" => return Some(FlushSize::Llc),
        _ => {}
    }
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..digits].parse().ok()?;
    let mult = match &s[digits..] {
        "K" | "k" | "KiB" | "KB" | "kB" => 1,
        "M" | "m" | "MiB" | "MB" => 1024,
        "G" | "g" | "GiB" | "GB" => 1024 * 1024,
        _ => return None,
    };
    let kib = n.checked_mul(mult)?;
    (kib > 0).then_some(FlushSize::KiB(kib))
}

/// A sampling-budget duration (`min_time`, `max_time`): whole milliseconds,
/// the drivers' unit for it, at least `least`.
pub(super) fn sampling_ms(text: &str, span: Span, least: u64) -> Built<u64> {
    let ns = parse_duration_ns(text).ok_or_else(|| {
        Diagnostic::new(format!("`{text}` is not a duration"), span)
            .with_hint("write a number with a unit: ms or s (e.g. 100ms)")
    })?;
    if !ns.is_multiple_of(1_000_000) || ns / 1_000_000 < least {
        return Err(Diagnostic::new(
            format!("`{text}` is not a whole number of milliseconds of at least {least}"),
            span,
        )
        .with_hint("the sampling budget is set in whole milliseconds, e.g. 100ms or 0.25s"));
    }
    Ok(ns / 1_000_000)
}

pub(super) fn parse_duration_ns(s: &str) -> Option<u64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let v: f64 = s[..split].parse().ok()?;
    let mult = match &s[split..] {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    // `0.1s` is not exactly 1e8 in binary: round, but refuse real sub-ns parts.
    let ns = v * mult;
    let r = ns.round();
    let whole = (ns - r).abs() <= 1e-6 * r.max(1.0);
    (ns.is_finite() && ns >= 0.0 && r < u64::MAX as f64 && whole).then_some(r as u64)
}
