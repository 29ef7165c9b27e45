//! C declarations: the words and stars of `const double* A` as a [`CType`].

use super::grammar::Built;
use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic};

/// One token of a C declaration: a word or a `*`.
pub(super) struct DeclToken {
    pub(super) text: String,
    pub(super) span: Span,
}

pub(super) fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "void"
            | "char"
            | "short"
            | "int"
            | "long"
            | "float"
            | "double"
            | "signed"
            | "unsigned"
            | "_Complex"
            | "complex"
            | "_Bool"
            | "bool"
            | "const"
            | "volatile"
            | "restrict"
            | "__restrict"
            | "__restrict__"
            | "struct"
            | "size_t"
            | "ptrdiff_t"
            | "int8_t"
            | "int16_t"
            | "int32_t"
            | "int64_t"
            | "uint8_t"
            | "uint16_t"
            | "uint32_t"
            | "uint64_t"
    )
}

/// Builds a [`CType`] from declaration words and stars (`const double *`).
pub(super) fn ctype_from_tokens(toks: &[DeclToken]) -> Built<CType> {
    let span = Span::new(toks[0].span.start, toks[toks.len() - 1].span.end);
    let mut is_const = false;
    let mut pointers: u8 = 0;
    let mut words: Vec<&DeclToken> = Vec::new();
    let mut i = 0;
    let mut struct_name: Option<String> = None;
    while i < toks.len() {
        let t = &toks[i];
        match t.text.as_str() {
            "*" => {
                pointers = pointers.checked_add(1).ok_or_else(|| {
                    Diagnostic::new("too many `*`", t.span)
                        .with_hint("at most 255 levels of pointer")
                })?
            }
            "const" => {
                // `const` after a `*` qualifies the pointer itself, which does
                // not change how the driver allocates or passes the operand.
                if pointers == 0 {
                    is_const = true;
                }
            }
            "volatile" | "restrict" | "__restrict" | "__restrict__" | "register" => {}
            "struct" | "union" | "enum" => {
                let Some(n) = toks
                    .get(i + 1)
                    .filter(|n| n.text != "*" && !is_type_word(&n.text))
                else {
                    return Err(
                        Diagnostic::new(format!("`{}` needs a tag name", t.text), t.span)
                            .with_hint(format!("write `{} NAME`", t.text)),
                    );
                };
                if t.text != "struct" {
                    return Err(Diagnostic::new(
                        format!("`{}` types are not supported", t.text),
                        t.span,
                    )
                    .with_hint("declare a typedef in an include= clause and use its name"));
                }
                if pointers > 0 || struct_name.is_some() || !words.is_empty() {
                    return Err(Diagnostic::new("`struct` must start the type", t.span)
                        .with_hint(format!("write `const struct {} *`", n.text)));
                }
                struct_name = Some(n.text.clone());
                i += 1;
            }
            _ => {
                if pointers > 0 {
                    return Err(Diagnostic::new(
                        format!("unexpected `{}` after `*`", t.text),
                        t.span,
                    )
                    .with_hint("the type comes before the `*`, the name after it"));
                }
                if struct_name.is_some() {
                    return Err(Diagnostic::new(
                        format!("unexpected `{}` after the struct name", t.text),
                        t.span,
                    )
                    .with_hint("write `struct NAME*`"));
                }
                words.push(t);
            }
        }
        i += 1;
    }
    let base = if let Some(n) = struct_name {
        BaseType::Struct(n)
    } else {
        base_from_words(&words, span)?
    };
    Ok(CType {
        is_const,
        base,
        pointers,
        span,
    })
}

pub(super) fn base_from_words(words: &[&DeclToken], span: Span) -> Built<BaseType> {
    use BaseType::*;
    if words.is_empty() {
        return Err(Diagnostic::new("missing type", span).with_hint("write e.g. `double*`"));
    }
    if words.len() == 1 {
        let w = words[0].text.as_str();
        let named = match w {
            "size_t" => Some(SizeT),
            "ptrdiff_t" => Some(PtrdiffT),
            "int8_t" => Some(Int8),
            "int16_t" => Some(Int16),
            "int32_t" => Some(Int32),
            "int64_t" => Some(Int64),
            "uint8_t" => Some(UInt8),
            "uint16_t" => Some(UInt16),
            "uint32_t" => Some(UInt32),
            "uint64_t" => Some(UInt64),
            "_Bool" | "bool" => Some(Bool),
            _ => None,
        };
        if let Some(b) = named {
            return Ok(b);
        }
        if !is_type_word(w) {
            return Ok(Named(w.to_string()));
        }
    }
    let mut count = std::collections::BTreeMap::<&str, usize>::new();
    for w in words {
        let key = match w.text.as_str() {
            "complex" => "_Complex",
            k @ ("void" | "char" | "short" | "int" | "long" | "float" | "double" | "signed"
            | "unsigned" | "_Complex") => k,
            other => {
                return Err(Diagnostic::new(
                    format!("`{other}` cannot be combined with other type words"),
                    w.span,
                )
                .with_hint(
                    did_you_mean(
                        other,
                        [
                            "void", "char", "short", "int", "long", "float", "double", "unsigned",
                        ],
                    )
                    .unwrap_or_else(|| "a typedef name must be the only word of its type".into()),
                ))
            }
        };
        *count.entry(key).or_default() += 1;
    }
    let n = |k: &str| count.get(k).copied().unwrap_or(0);
    let total: usize = count.values().sum();
    let unsigned = n("unsigned") > 0;
    let signed = n("signed") > 0;
    let bad = || {
        let text: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        Diagnostic::new(format!("`{}` is not a C type", text.join(" ")), span)
            .with_hint("supported: void, char, short, int, long, long long (signed/unsigned), float, double, long double, float/double _Complex, size_t, int64_t, ...")
    };
    if n("unsigned") > 1 || n("signed") > 1 || (unsigned && signed) {
        return Err(bad());
    }
    let sign_words = n("unsigned") + n("signed");
    let b = if n("void") == 1 && total == 1 {
        Void
    } else if n("float") == 1 && total == 1 {
        Float
    } else if n("double") == 1 && total == 1 {
        Double
    } else if n("double") == 1 && n("long") == 1 && total == 2 {
        LongDouble
    } else if n("_Complex") == 1 && n("float") == 1 && total == 2 {
        FloatComplex
    } else if n("_Complex") == 1 && n("double") == 1 && total == 2 {
        DoubleComplex
    } else if n("char") == 1 && total == 1 + sign_words {
        if unsigned {
            UnsignedChar
        } else if signed {
            SignedChar
        } else {
            Char
        }
    } else if n("short") == 1 && total == 1 + sign_words + n("int") && n("int") <= 1 {
        if unsigned {
            UnsignedShort
        } else {
            Short
        }
    } else if n("long") == 1 && total == 1 + sign_words + n("int") && n("int") <= 1 {
        if unsigned {
            UnsignedLong
        } else {
            Long
        }
    } else if n("long") == 2 && total == 2 + sign_words + n("int") && n("int") <= 1 {
        if unsigned {
            UnsignedLongLong
        } else {
            LongLong
        }
    } else if n("int") <= 1 && total == n("int") + sign_words && total >= 1 {
        if unsigned {
            UnsignedInt
        } else {
            Int
        }
    } else {
        return Err(bad());
    };
    Ok(b)
}
