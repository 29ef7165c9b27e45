//! Diagnostics: errors that point into the spec source.
//!
//! A [`Diagnostics`] owns a copy of the file name and source so that its
//! `Display` can render every error like a compiler does:
//!
//! ```text
//! gemm.spec:7:24: error: undefined name `ldaa`
//!    7 |   A=Matrix(double, ldaa, K, RANDOM, flush|align(16));
//!      |                    ^^^^
//!      = hint: did you mean `lda`?
//! ```

use crate::ast::Span;
use std::fmt;

/// How bad a finding is: an error stops the spec; a warning says what
/// tdg assumed for something the spec leaves out and goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Error,
    Warning,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One error with where it is and, when we can guess, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// Where in the source; `None` for errors about the file as a whole
    /// (it cannot be read, it has no `routine=` clause).
    pub span: Option<Span>,
    /// A way out, e.g. "did you mean `lda`?".
    pub hint: Option<String>,
    /// 1-based line and column (in characters) of `span.start`; 0 when `span` is `None`.
    pub line: usize,
    pub col: usize,
}

impl Diagnostic {
    pub fn new(message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: Some(span),
            hint: None,
            line: 0,
            col: 0,
        }
    }

    /// A located warning: the spec is accepted with an assumption it states.
    pub fn warning(message: impl Into<String>, span: Span) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::new(message, span)
        }
    }

    /// An error about the whole file, without a location.
    pub fn whole_file(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span: None,
            hint: None,
            line: 0,
            col: 0,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_hint_opt(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// Every error found in one file. Never empty when returned as an `Err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    pub file: String,
    pub src: String,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Attaches line/column numbers to `items`, sorted by position.
    pub fn new(file: &str, src: &str, mut items: Vec<Diagnostic>) -> Self {
        for d in &mut items {
            if let Some(span) = d.span {
                let (line, col) = line_col(src, span.start);
                d.line = line;
                d.col = col;
            }
        }
        items.sort_by_key(|d| (d.span.is_some(), d.span.map(|s| s.start).unwrap_or(0)));
        Diagnostics {
            file: file.to_string(),
            src: src.to_string(),
            items,
        }
    }

    pub fn single(file: &str, src: &str, d: Diagnostic) -> Self {
        Diagnostics::new(file, src, vec![d])
    }

    pub fn first(&self) -> &Diagnostic {
        &self.items[0]
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// 1-based (line, column) of a byte offset; the column counts characters.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(src, offset.min(src.len()));
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = src[line_start..offset].chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, d) in self.items.iter().enumerate() {
            if n > 0 {
                writeln!(f)?;
            }
            render(f, &self.file, &self.src, d)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

fn render(f: &mut fmt::Formatter<'_>, file: &str, src: &str, d: &Diagnostic) -> fmt::Result {
    let Some(span) = d.span else {
        write!(f, "{file}: {}: {}", d.severity.label(), d.message)?;
        if let Some(h) = &d.hint {
            write!(f, "\n  = hint: {h}")?;
        }
        return Ok(());
    };
    writeln!(
        f,
        "{file}:{}:{}: {}: {}",
        d.line,
        d.col,
        d.severity.label(),
        d.message
    )?;
    let start = floor_char_boundary(src, span.start.min(src.len()));
    let line_start = src[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = src[start..]
        .find('\n')
        .map(|i| start + i)
        .unwrap_or(src.len());
    let text = src[line_start..line_end].trim_end_matches('\r');
    // The caret covers the span up to the end of its first line, at least one column.
    let end = floor_char_boundary(src, span.end.clamp(start, line_end.max(start)));
    let width = src[start..end].chars().count().max(1);
    let lineno = d.line.to_string();
    let pad = " ".repeat(lineno.len());
    // Tabs in the source line are kept under the caret so columns line up.
    let lead: String = src[line_start..start]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    writeln!(f, " {lineno} | {}", expand_control(text))?;
    write!(f, " {pad} | {lead}{}", "^".repeat(width))?;
    if let Some(h) = &d.hint {
        write!(f, "\n {pad} = hint: {h}")?;
    }
    Ok(())
}

/// Control characters other than tab would garble the terminal.
fn expand_control(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect()
}

/// The closest candidate to `word`, if it is close enough to be a likely typo.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(&str, f64)> = None;
    for c in candidates {
        if c == word {
            continue;
        }
        let score = strsim::jaro_winkler(word, c);
        let lower_eq = c.eq_ignore_ascii_case(word);
        let score = if lower_eq { 1.0 } else { score };
        let better = match best {
            Some((_, s)) => score > s,
            None => true,
        };
        if score >= 0.8 && better {
            best = Some((c, score));
        }
    }
    best.map(|(c, _)| c)
}

/// `"did you mean `x`?"` for the closest candidate, if any.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(word, candidates).map(|c| format!("did you mean `{c}`?"))
}
