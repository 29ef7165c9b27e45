//! Error shaping: pest's failures turned into diagnostics that point at
//! the cause (an unclosed brace or comment, a clause without `=`, nesting
//! too deep) with a hint.

use super::grammar::{InputKind, Rule, CLAUSE_NAME, MAX_DEPTH};
use crate::ast::*;
use crate::diag::Diagnostic;
use crate::vocabulary::CLAUSES;

/// Pre-scan for absurd `(`/`{`/`[` nesting outside strings and comments, so
/// that neither pest nor the builder recurses without bound.
pub(super) fn nesting_too_deep(src: &str) -> Option<Diagnostic> {
    let bytes = src.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                let q = bytes[i];
                i += 1;
                while i < bytes.len() && bytes[i] != q && bytes[i] != b'\n' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'(' | b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(
                        Diagnostic::new(
                            format!("brackets nested more than {MAX_DEPTH} deep"),
                            Span::new(i, i + 1),
                        )
                        .with_hint("simplify the expression or move it into the routine body"),
                    );
                }
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Human name of what a grammar rule stands for, for "expected ..." messages.
pub(super) fn rule_name(rule: Rule) -> Option<&'static str> {
    use Rule::*;
    Some(match rule {
        include_clause | lang_clause | routine_clause | init_clause | returns_clause
        | record_clause | flop_clause | timer_clause | checkpoint_clause | unknown_clause => {
            CLAUSE_NAME
        }
        EOI => "end of file",
        word | name | decl | param | params => "a name",
        star => "`*`",
        array_suffix => "`[]`",
        body => "`{`",
        body_text => "`}`",
        init_entry => "an entry `name=value;`",
        array_init | array_kind => "`Vector(...)`/`Matrix(...)`",
        elem_type => "an element type",
        string => "a quoted string",
        array_arg | expr | term | unary | primary | call | neg | int | float | flop_bare
        | flop_formula => "an expression",
        add_op | mul_op => "an operator",
        setting => "a setting `name=value;`",
        setting_value | quantity => "a value",
        str_inner => "`\"`",
        _ => return None,
    })
}

pub(super) fn pest_error(
    e: &pest::error::Error<Rule>,
    src: &str,
    base: usize,
    kind: InputKind,
) -> Diagnostic {
    use pest::error::InputLocation;
    let attempts = e.parse_attempts();
    let loc = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    }
    .min(src.len());
    if let Some(d) = clause_without_equals(src, loc, base) {
        return d;
    }
    // The furthest position any alternative reached is where the user's
    // intent broke down; pest's own location can be an earlier rule start.
    let pos = match &attempts {
        Some(a) if a.max_position <= src.len() && a.max_position >= loc => a.max_position,
        _ => loc,
    };

    // Special cases whose generic "expected ..." would mislead.
    if let Some(d) = unclosed_at(src, pos, base) {
        return d;
    }

    // A token's type is not exported; its Display is the literal text.
    let tokens: Vec<String> = attempts.as_ref().map_or_else(Vec::new, |a| {
        a.expected_tokens()
            .iter()
            .map(ToString::to_string)
            .collect()
    });
    let mut expected = expected_at(e, &tokens, pos == loc);
    expected.truncate(6);
    // Asked before the list is joined into the message (which pops its last entry).
    let expects_semicolon = expected.iter().any(|e| e == "`;`");
    let found = describe_at(src, pos, kind);
    let message = match expected.len() {
        0 => format!("unexpected {found}"),
        1 => format!("expected {}, found {found}", expected[0]),
        _ => {
            let last = expected.pop().unwrap_or_default();
            format!("expected {} or {last}, found {found}", expected.join(", "))
        }
    };
    // A missing `;` is best shown right after the token it should follow
    // when the next token is on a later line.
    let prev_end = src[..pos].trim_end().len();
    if expects_semicolon && src[prev_end..pos].contains('\n') {
        return Diagnostic::new(
            message.replacen(&format!(", found {found}"), "", 1) + " at the end of this line",
            Span::new(base + prev_end, base + prev_end),
        )
        .with_hint("every clause and init entry ends with `;`");
    }
    let end = pos + token_len_at(src, pos);
    let hint = syntax_hint(kind, &message, expects_semicolon);
    Diagnostic::new(message, Span::new(base + pos, base + end)).with_hint(hint)
}

/// What the parser would have accepted at the furthest position, in
/// words, each once, what a general entry covers left out: literal tokens
/// that are not noise and, when pest's own location is that position
/// (`at_location`), its rules' names.
fn expected_at(e: &pest::error::Error<Rule>, tokens: &[String], at_location: bool) -> Vec<String> {
    let mut expected: Vec<String> = Vec::new();
    for token in tokens.iter().filter(|t| !is_noise(t)) {
        push_unique(&mut expected, format!("`{token}`"));
    }
    // pest's rule list belongs to its own location; it only describes the
    // furthest position when the two coincide.
    if let (pest::error::ErrorVariant::ParsingError { positives, .. }, true) =
        (&e.variant, at_location)
    {
        for r in positives {
            if let Some(n) = rule_name(*r) {
                push_unique(&mut expected, n.to_string());
            }
        }
    }
    // Collapse what a more general entry already says.
    let has = |x: &str, v: &Vec<String>| v.iter().any(|e| e == x);
    if has("an operator", &expected) {
        expected.retain(|e| !matches!(e.as_str(), "`+`" | "`-`" | "`*`" | "`/`" | "`%`"));
    }
    if has("an expression", &expected) {
        expected.retain(|e| !matches!(e.as_str(), "`(`" | "`-`" | "a name" | "a quoted string"));
    }
    if has(CLAUSE_NAME, &expected) {
        expected.retain(|e| e != "a name");
    }
    expected
}

/// A token not worth naming: whitespace, a comment's start, a word
/// character (the rule's name says it better), an escape or quote, a range
/// (printed as `a..z`).
fn is_noise(t: &str) -> bool {
    t.is_empty()
        || t.chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        || matches!(
            t,
            "//" | "/*"
                | " "
                | "\t"
                | "\r"
                | "\n"
                | "\u{0C}"
                | "\u{FEFF}"
                | "."
                | "\\"
                | "\""
                | "'"
        )
        || (t.len() > 2 && t.contains(".."))
}

/// The hint of a syntax error: the `;` rule, else the syntax of what was
/// being read.
fn syntax_hint(kind: InputKind, message: &str, expects_semicolon: bool) -> &'static str {
    if expects_semicolon {
        return "every clause and init entry ends with `;`";
    }
    match kind {
        InputKind::Formula => {
            "a flop formula is arithmetic (`+ - * / %`, parentheses) on parameters, macros and numbers, e.g. \"2*M*N*K + M*N\""
        }
        InputKind::Condition => {
            "a constraint compares arithmetic on the tuned macros with == != < <= > >=, joined by && and ||, e.g. \"NB % MU == 0 && MU*NU <= 16\""
        }
        InputKind::File if message.contains(CLAUSE_NAME) => {
            "each clause reads `name=value;`, e.g. `flop=\"2*N\";`; docs/spec-language.md lists them"
        }
        InputKind::File => "docs/spec-language.md shows the syntax of each clause and value",
    }
}

pub(super) fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// An unterminated string or brace at or before the error position.
pub(super) fn unclosed_at(src: &str, pos: usize, base: usize) -> Option<Diagnostic> {
    // A string opened at `pos` (or just before it) that never closes on its line.
    let quote = if src[pos..].starts_with('"') {
        Some(pos)
    } else {
        let line_start = src[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
        // An odd number of unescaped quotes before pos on this line: the last one is open.
        let line = &src[line_start..pos];
        let quotes: Vec<usize> = line
            .char_indices()
            .filter(|&(i, c)| c == '"' && !line[..i].ends_with('\\'))
            .map(|(i, _)| line_start + i)
            .collect();
        (quotes.len() % 2 == 1).then(|| *quotes.last().unwrap_or(&pos))
    };
    if let Some(q) = quote {
        let rest = &src[q + 1..];
        let line_rest = &rest[..rest.find('\n').unwrap_or(rest.len())];
        let closed = line_rest
            .char_indices()
            .any(|(i, c)| c == '"' && !line_rest[..i].ends_with('\\'));
        if !closed {
            return Some(
                Diagnostic::new("string is never closed", Span::new(base + q, base + q + 1))
                    .with_hint("add the closing `\"` (a string cannot span lines)"),
            );
        }
    }
    // A `/* ...` never closed swallows the rest of the file, braces included:
    // the comment is the cause, not the brace it hides.
    if let Some(start) = unclosed_block_comment(src).filter(|&c| c <= pos) {
        return Some(
            Diagnostic::new(
                "this comment is never closed",
                Span::new(base + start, base + start + 2),
            )
            .with_hint("add `*/` where the comment ends"),
        );
    }
    let open = if pos == src.len() {
        first_unclosed_brace(src)
    } else {
        Some(pos).filter(|&p| src[p..].starts_with('{'))
    };
    if let Some(pos) = open.filter(|&p| matching_brace(src, p).is_none()) {
        return Some(
            Diagnostic::new(
                "this `{` is never closed",
                Span::new(base + pos, base + pos + 1),
            )
            .with_hint(if src[..pos].trim_end().ends_with(')') {
                "check the braces of the routine body (braces in strings and comments do not count)"
            } else {
                "add the matching `}` (and the `;` after it)"
            }),
        );
    }
    None
}

/// `routine void f();`: a clause keyword not followed by `=`.
pub(super) fn clause_without_equals(src: &str, pos: usize, base: usize) -> Option<Diagnostic> {
    let len = token_len_at(src, pos);
    let word = &src[pos..pos + len];
    if !CLAUSES.contains(&word) {
        return None;
    }
    let next = src[pos + len..].trim_start().chars().next();
    let ok = next == Some('=') || (word == "returns" && next == Some('('));
    (!ok).then(|| {
        Diagnostic::new(
            format!("expected `=` after `{word}`"),
            Span::new(base + pos, base + pos + len),
        )
        .with_hint(format!("write `{word}=...`"))
    })
}

/// The outermost `{` that is never closed (strings and comments skipped).
pub(super) fn first_unclosed_brace(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' {
            match matching_brace(src, i) {
                Some(close) => i = close,
                None => return Some(i),
            }
        } else if let Some((end, _)) = skip_literal_or_comment(b, i) {
            i = end;
        }
        i += 1;
    }
    None
}

/// Start of a `/*` comment that runs to the end of the text (strings and
/// other comments skipped the way the brace scanners skip them).
pub(super) fn unclosed_block_comment(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if let Some((end, closed)) = skip_literal_or_comment(b, i) {
            if !closed && b[i] == b'/' {
                return Some(i);
            }
            i = end;
        }
        i += 1;
    }
    None
}

/// Offset of the `}` closing the `{` at `open`, skipping strings, character
/// literals and comments the way the grammar's `body` rule does.
pub(super) fn matching_brace(src: &str, open: usize) -> Option<usize> {
    let b = src.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {
                if let Some((end, closed)) = skip_literal_or_comment(b, i) {
                    if !closed {
                        return None;
                    }
                    i = end;
                }
            }
        }
        i += 1;
    }
    None
}

/// When a string, character literal or comment starts at `i`: the offset of
/// its last byte (the closing quote, the newline ending a `//` comment, the
/// `/` of `*/`) and whether it closed (a literal before the end of its line,
/// a `/*` comment before the end of the text).
/// Shared by the brace scanners so both read C text the same way.
pub(super) fn skip_literal_or_comment(b: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut i = start;
    match b[i] {
        q @ (b'"' | b'\'') => {
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\n' {
                    return Some((i, false));
                }
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            Some((i, i < b.len()))
        }
        b'/' if b.get(i + 1) == Some(&b'/') => {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            Some((i, true))
        }
        b'/' if b.get(i + 1) == Some(&b'*') => {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            Some((i + 1, i + 1 < b.len()))
        }
        _ => None,
    }
}

pub(super) fn token_len_at(src: &str, pos: usize) -> usize {
    let rest = &src[pos..];
    let Some(c) = rest.chars().next() else {
        return 0;
    };
    if c.is_alphanumeric() || c == '_' {
        rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len())
    } else {
        c.len_utf8()
    }
}

pub(super) fn describe_at(src: &str, pos: usize, kind: InputKind) -> String {
    let len = token_len_at(src, pos);
    if len == 0 {
        return match kind {
            InputKind::File => "end of file".into(),
            InputKind::Formula | InputKind::Condition => "end of formula".into(),
        };
    }
    let tok = &src[pos..pos + len];
    match tok {
        "\n" | "\r" => "end of line".into(),
        _ => format!("`{}`", tok.escape_debug()),
    }
}
