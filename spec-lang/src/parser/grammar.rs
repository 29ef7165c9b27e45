//! The pest grammar (`spec.pest`) and what every part of the parser shares
//! about its tree: the rules, where a node is in the source, and the result
//! of building one AST node from it.

use crate::ast::Span;
use crate::diag::Diagnostic;
use pest::iterators::Pair;

#[derive(pest_derive::Parser)]
#[grammar = "spec.pest"]
pub(super) struct SpecParser;

/// Deepest expression tree (and deepest `(`/`{` nesting) accepted. Real specs
/// stay far below; the limit keeps recursion over hostile input bounded.
pub const MAX_DEPTH: usize = 200;

/// Where the input ends, for "found end of ..." messages.
#[derive(Clone, Copy)]
pub(super) enum InputKind {
    File,
    Formula,
    Condition,
}

pub(super) const CLAUSE_NAME: &str = "a clause (`routine=`, `init=`, `flop=`, ...)";

pub(super) fn span_of(p: &Pair<Rule>, base: usize) -> Span {
    let s = p.as_span();
    Span::new(base + s.start(), base + s.end())
}

pub(super) type Built<T> = Result<T, Diagnostic>;
