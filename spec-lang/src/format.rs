//! Canonical layout of a spec.
//!
//! [`format`] prints an AST: clauses in a fixed order (include, lang, routine,
//! init, returns, record, flop, timer, checkpoint, tune), one init entry per line, `_` for
//! an empty attribute list, `+`/`-` spaced and `*`/`/`/`%` tight, and only the
//! parentheses the meaning needs. A routine body and the flop string are kept
//! exactly as written. [`format_with_comments`] does the same and keeps the
//! comments of the source the spec was parsed from (`crate::format_source`
//! parses it first): each comment moves with the clause or init entry it
//! precedes (or ends the line of).

use crate::ast::*;
use crate::vocabulary::Keyword;
use std::fmt::Write;

/// Lines longer than this get their prototype parameters wrapped.
const WIDTH: usize = 100;

/// The canonical text of `spec` (without comments: the AST has none).
pub fn format(spec: &Spec) -> String {
    Printer::default().spec(spec, &Comments::default())
}

/// The canonical text of `spec`, parsed from `src`, with the comments of
/// `src` kept where they were.
pub fn format_with_comments(spec: &Spec, src: &str) -> String {
    let comments = Comments::collect(src, spec);
    Printer::default().spec(spec, &comments)
}

#[derive(Default)]
struct Printer {
    out: String,
}

/// Comments of the source, attached to anchors (byte offsets where a clause
/// or init entry starts).
#[derive(Default)]
struct Comments {
    /// (anchor start, comment text) for comments on the lines before an anchor.
    leading: Vec<(usize, String)>,
    /// (anchor start, comment text) for a comment ending an anchor's last line.
    trailing: Vec<(usize, String)>,
    /// Comments after the last anchor.
    tail: Vec<String>,
}

impl Comments {
    fn collect(src: &str, spec: &Spec) -> Comments {
        // Anchors with their source extent, in source order.
        let mut anchors: Vec<(usize, usize)> = Vec::new();
        for i in &spec.includes {
            anchors.push((i.span.start, i.span.end));
        }
        anchors.push((spec.routine.span.start, spec.routine.span.end));
        for i in &spec.init {
            anchors.push((i.span.start, i.span.end));
        }
        if let Some(r) = spec.returns.first() {
            anchors.push((
                r.span.start,
                spec.returns.last().map_or(r.span.end, |l| {
                    let end = l.path.last().map_or(l.span.end, |m| m.span.end);
                    l.count.as_ref().map_or(end, |c| c.span().end)
                }),
            ));
        }
        if let Some(r) = &spec.record {
            anchors.push((r.span.start, r.span.end));
        }
        if let Some(f) = &spec.flop {
            anchors.push((f.span.start, f.span.end));
        }
        if let Some(t) = &spec.timer {
            anchors.push((t.span.start, t.span.end));
        }
        if let Some(c) = &spec.checkpoint {
            anchors.push((c.span.start, c.span.end));
        }
        if let Some(t) = &spec.tune {
            anchors.push((t.span.start, t.span.end));
        }
        anchors.sort();
        let body = spec
            .routine
            .body
            .as_ref()
            .map(|b| (b.span.start, b.span.end));
        let mut c = Comments::default();
        for (start, end) in comment_spans(src, body) {
            let text = src[start..end].trim_end().to_string();
            // Inside an entry (`M /* rows */`): it follows that entry.
            if let Some((s, _)) = anchors.iter().find(|(s, e)| *s < start && end <= *e) {
                c.trailing.push((*s, text));
                continue;
            }
            // Trailing: same line as the end of the anchor just before it.
            let prev = anchors.iter().rev().find(|(_, e)| *e <= start);
            if let Some((ps, pe)) = prev {
                if !src[*pe..start].contains('\n') {
                    c.trailing.push((*ps, text));
                    continue;
                }
            }
            match anchors.iter().find(|(s, _)| *s >= end) {
                Some((s, _)) => c.leading.push((*s, text)),
                None => c.tail.push(text),
            }
        }
        c
    }

    fn leading_for(&self, anchor: usize) -> impl Iterator<Item = &str> {
        self.leading
            .iter()
            .filter(move |(a, _)| *a == anchor)
            .map(|(_, t)| t.as_str())
    }

    fn trailing_for(&self, anchor: usize) -> Option<String> {
        let parts: Vec<&str> = self
            .trailing
            .iter()
            .filter(|(a, _)| *a == anchor)
            .map(|(_, t)| t.as_str())
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// Byte ranges of `//` and `/* */` comments outside strings and outside
/// `skip` (the routine body, kept verbatim: its text is C, where an unclosed
/// `/*` is the C compiler's business, not a spec comment).
fn comment_spans(src: &str, skip: Option<(usize, usize)>) -> Vec<(usize, usize)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some((s, e)) = skip {
            // `s < e`: an empty body has nothing to skip (and jumping would loop).
            if i == s && s < e {
                i = e;
                continue;
            }
        }
        match b[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let s = i;
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                out.push((s, i));
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let s = i;
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i = (i + 2).min(b.len());
                out.push((s, i));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

impl Printer {
    fn spec(mut self, spec: &Spec, c: &Comments) -> String {
        for inc in &spec.includes {
            self.item(
                c,
                inc.span.start,
                "",
                &format!("include={};", quote(&inc.text)),
            );
        }
        if spec.lang == Lang::Fortran {
            self.out.push_str("lang=fortran;\n");
        }
        self.routine_item(&spec.routine, c);
        if !spec.init.is_empty() {
            self.out.push_str("init={\n");
            for i in &spec.init {
                let line = format!("{}={};", i.name.name, init_value(&i.value));
                self.item(c, i.span.start, "  ", &line);
            }
            self.out.push_str("};\n");
        }
        if let Some(first) = spec.returns.first() {
            self.item(c, first.span.start, "", &returns(&spec.returns));
        }
        if let Some(r) = &spec.record {
            let names: Vec<&str> = r.names.iter().map(|n| n.name.as_str()).collect();
            self.item(
                c,
                r.span.start,
                "",
                &format!("record={};", names.join(", ")),
            );
        }
        if let Some(f) = &spec.flop {
            self.item(c, f.span.start, "", &format!("flop=\"{}\";", f.text));
        }
        if let Some(t) = &spec.timer {
            self.item(c, t.span.start, "", &timer(t));
        }
        if let Some(cp) = &spec.checkpoint {
            self.item(c, cp.span.start, "", &checkpoint(cp));
        }
        if let Some(t) = &spec.tune {
            self.item(c, t.span.start, "", &tune(t));
        }
        for t in &c.tail {
            self.out.push_str(t);
            self.out.push('\n');
        }
        self.out
    }

    /// The routine's prototype, and its body when it has one.
    fn routine_item(&mut self, r: &Routine, c: &Comments) {
        let routine = self.routine(r);
        if r.body.is_none() {
            self.item(c, r.span.start, "", &routine);
            return;
        }
        // Nothing may follow a body on its last line: the body is C text
        // kept verbatim, and an unbalanced quote in it could pair with a
        // quote in the comment. Its trailing comments go above it instead.
        self.leading(c, r.span.start, "");
        if let Some(t) = c.trailing_for(r.span.start) {
            self.out.push_str(&t);
            self.out.push('\n');
        }
        self.out.push_str(&routine);
        self.out.push('\n');
    }

    /// Writes leading comments, the (possibly multi-line) text, and a trailing comment.
    fn item(&mut self, c: &Comments, anchor: usize, indent: &str, text: &str) {
        self.leading(c, anchor, indent);
        self.out.push_str(indent);
        self.out.push_str(text);
        if let Some(t) = c.trailing_for(anchor) {
            self.out.push(' ');
            self.out.push_str(&t);
        }
        self.out.push('\n');
    }

    /// The comments on the lines above `anchor`, at `indent`.
    fn leading(&mut self, c: &Comments, anchor: usize, indent: &str) {
        for l in c.leading_for(anchor) {
            for line in l.lines() {
                let _ = writeln!(self.out, "{indent}{}", line.trim_start());
            }
        }
    }

    fn routine(&self, r: &Routine) -> String {
        let head = format!("routine={} {}(", r.ret.text(), r.name.name);
        let params: Vec<String> = r
            .params
            .iter()
            .map(|p| format!("{} {}", p.ty.text(), p.name.name))
            .collect();
        let one_line = format!("{head}{})", params.join(", "));
        let mut s = if one_line.len() <= WIDTH {
            one_line
        } else {
            // Fill lines up to WIDTH, continuation lines indented by 4.
            let mut s = head;
            let mut line_len = s.len();
            for (i, p) in params.iter().enumerate() {
                let piece = if i + 1 < params.len() {
                    format!("{p},")
                } else {
                    format!("{p})")
                };
                if i > 0 {
                    if line_len + 1 + piece.len() > WIDTH {
                        s.push_str("\n    ");
                        line_len = 4;
                    } else {
                        s.push(' ');
                        line_len += 1;
                    }
                }
                s.push_str(&piece);
                line_len += piece.len();
            }
            if params.is_empty() {
                s.push(')');
            }
            s
        };
        match &r.body {
            Some(b) => {
                let _ = write!(s, " {{{}}};", b.text);
            }
            None => s.push(';'),
        }
        s
    }
}

fn init_value(v: &InitValue) -> String {
    match v {
        InitValue::Scalar(e) => expr(e),
        InitValue::Array(a) => {
            let kind = match a.kind {
                ArrayKind::Vector => "Vector",
                ArrayKind::Matrix => "Matrix",
                ArrayKind::Array2D => "Array2D",
                ArrayKind::SVector => "SVector",
                ArrayKind::SMatrix => "SMatrix",
            };
            let fill = fill(&a.fill);
            let attrs = attrs(&a.attrs);
            let ty = a.elem.text();
            let dims: Vec<String> = a.dims.iter().map(expr).collect();
            match a.kind {
                ArrayKind::Vector | ArrayKind::SVector => {
                    format!("{kind}({ty}, {fill}, {attrs}, {})", dims.join(", "))
                }
                _ => format!("{kind}({ty}, {}, {fill}, {attrs})", dims.join(", ")),
            }
        }
    }
}

fn fill(f: &Fill) -> String {
    match f {
        Fill::Random(_) => "RANDOM".into(),
        Fill::RandomRange { lo, hi, .. } => format!("RANDOM({}, {})", expr(lo), expr(hi)),
        Fill::Zero(_) => "ZERO".into(),
        // The reference generator's bare number stays bare.
        // (Spans compare equal whatever they hold: compare the offsets.)
        Fill::Const(e, s)
            if (s.start, s.end) == (e.span().start, e.span().end) && e.is_number_literal() =>
        {
            expr(e)
        }
        Fill::Const(e, _) => format!("CONST({})", expr(e)),
        Fill::Seq(_) => "SEQ".into(),
        Fill::File(p, _) => format!("FILE({})", quote(p)),
    }
}

fn attrs(a: &[Attr]) -> String {
    if a.is_empty() {
        return "_".into();
    }
    a.iter()
        .map(|a| match a {
            Attr::Flush(_) => "flush".to_string(),
            Attr::Warm(_) => "warm".to_string(),
            Attr::Touch(_) => "touch".to_string(),
            Attr::Align(n, _) => format!("align({n})"),
            Attr::Misalign(m, _) => format!("misalign({m})"),
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// `returns(X, Y[n]);`
fn returns(list: &[Output]) -> String {
    let names: Vec<String> = list
        .iter()
        .map(|r| match &r.count {
            Some(count) => format!("{}[{}]", r.text(), expr(count)),
            None => r.text(),
        })
        .collect();
    format!("returns({});", names.join(", "))
}

/// `checkpoint="image";`, or with its mode spelt out when delayed.
fn checkpoint(cp: &CheckpointClause) -> String {
    match cp.mode {
        CheckpointMode::Immediate => format!("checkpoint={};", quote(&cp.image)),
        CheckpointMode::Delayed(k) => format!(
            "checkpoint={{ image={}; mode=delayed({k}); }};",
            quote(&cp.image)
        ),
    }
}

fn tune(t: &TuneClause) -> String {
    let parts: Vec<String> = t
        .roles
        .iter()
        .map(|(name, role)| format!("{}={};", name.name, role.spelling()))
        .chain(t.layout.map(|l| format!("layout={};", l.spelling())))
        .chain(
            t.constraints
                .iter()
                .map(|c| format!("constraint={};", quote(&c.text))),
        )
        .collect();
    if parts.is_empty() {
        "tune={};".into()
    } else {
        format!("tune={{ {} }};", parts.join(" "))
    }
}

fn timer(t: &TimerClause) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = t.method {
        parts.push(format!("method={};", m.spelling()));
    }
    if let Some(n) = t.samples {
        parts.push(format!("samples={n};"));
    }
    if let Some(s) = t.select {
        parts.push(format!("select={};", s.spelling()));
    }
    if let Some(f) = t.flush {
        parts.push(format!("flush={};", f.spelling()));
    }
    if let Some(fs) = t.flush_size {
        let v = match fs {
            FlushSize::Level(n) => format!("L{n}"),
            FlushSize::Llc => "LLC".into(),
            FlushSize::KiB(k) if k.is_multiple_of(1024 * 1024) => format!("{}G", k / (1024 * 1024)),
            FlushSize::KiB(k) if k.is_multiple_of(1024) => format!("{}M", k / 1024),
            FlushSize::KiB(k) => format!("{k}K"),
        };
        parts.push(format!("flush_size={v};"));
    }
    if let Some(ns) = t.min_interval_ns {
        parts.push(format!("min_interval={};", duration(ns)));
    }
    if let Some(ms) = t.min_time_ms {
        parts.push(format!("min_time={};", duration(ms * 1_000_000)));
    }
    if let Some(ms) = t.max_time_ms {
        parts.push(format!("max_time={};", duration(ms * 1_000_000)));
    }
    if let Some(p) = t.stable_pct {
        parts.push(format!("stable={p}%;"));
    }
    if let Some(o) = t.code_offset {
        parts.push(format!("code_offset={o};"));
    }
    if let Some(n) = t.threads {
        parts.push(format!("threads={n};"));
    }
    if parts.is_empty() {
        "timer={};".into()
    } else {
        format!("timer={{ {} }};", parts.join(" "))
    }
}

/// Largest unit that represents `ns` exactly.
fn duration(ns: u64) -> String {
    if ns > 0 && ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns > 0 && ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns > 0 && ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Binding strength: higher binds tighter.
fn prec(e: &Expr) -> u8 {
    match e {
        Expr::Binary {
            op: BinOp::Add | BinOp::Sub,
            ..
        } => 1,
        Expr::Binary { .. } => 2,
        Expr::Unary { .. } => 3,
        _ => 4,
    }
}

/// An expression in canonical form; parses back to the same tree.
pub fn expr(e: &Expr) -> String {
    let mut s = String::new();
    write_expr(&mut s, e);
    s
}

fn write_expr(s: &mut String, e: &Expr) {
    match e {
        Expr::Int(i, _) => {
            let _ = write!(s, "{i}");
        }
        Expr::Float(f, _) => {
            // `{:?}` is the shortest text that reads back as the same double
            // and always has a `.` or an exponent, so it stays a float.
            let _ = write!(s, "{f:?}");
        }
        Expr::Str(t, _) => s.push_str(&quote(t)),
        Expr::Name(id) => s.push_str(&id.name),
        Expr::Member { root, path, .. } => s.push_str(&member_path_text(&root.name, path)),
        Expr::Macro { name, default, .. } => {
            let _ = write!(s, "Macro({}, ", name.name);
            write_expr(s, default);
            s.push(')');
        }
        Expr::Random(_) => s.push_str("RANDOM"),
        Expr::RandomRange { lo, hi, .. } => {
            s.push_str("RANDOM(");
            write_expr(s, lo);
            s.push_str(", ");
            write_expr(s, hi);
            s.push(')');
        }
        Expr::Range { begin, incr, .. } => {
            s.push_str("Range(");
            write_expr(s, begin);
            s.push_str(", ");
            write_expr(s, incr);
            s.push(')');
        }
        Expr::Unary { operand, .. } => {
            s.push('-');
            paren_if(s, operand, prec(operand) < 3);
        }
        Expr::Binary { op, lhs, rhs, .. } => {
            let p = prec(e);
            // Left-associative: the left operand needs parentheses only if it
            // binds looser, the right one also if it binds the same.
            paren_if(s, lhs, prec(lhs) < p);
            match op {
                BinOp::Add | BinOp::Sub => {
                    let _ = write!(s, " {} ", op.symbol());
                }
                _ => s.push_str(op.symbol()),
            }
            paren_if(s, rhs, prec(rhs) <= p);
        }
    }
}

fn paren_if(s: &mut String, e: &Expr, paren: bool) {
    if paren {
        s.push('(');
        write_expr(s, e);
        s.push(')');
    } else {
        write_expr(s, e);
    }
}

/// The first line (1-based) where `a` and `b` differ, `None` if equal.
pub fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            _ => return Some(n),
        }
    }
}
