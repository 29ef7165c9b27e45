//! C declarations: the words and stars of `const double* A` as a [`CType`].

use super::grammar::Built;
use crate::ast::*;
use crate::diag::{did_you_mean, Diagnostic};
use crate::vocabulary::{C_TYPE_NAMES, C_TYPE_QUALIFIERS};
use std::collections::BTreeMap;

/// One token of a C declaration: a word or a `*`.
pub(super) struct DeclToken {
    pub(super) text: String,
    pub(super) span: Span,
}

/// A word of a built-in C type or a qualifier: never a typedef's name.
pub(super) fn is_type_word(w: &str) -> bool {
    C_TYPE_NAMES.contains(&w) || C_TYPE_QUALIFIERS.contains(&w)
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
    let [first, ..] = words else {
        return Err(Diagnostic::new("missing type", span).with_hint("write e.g. `double*`"));
    };
    if words.len() == 1 {
        if let Some(b) = one_word_type(&first.text) {
            return Ok(b);
        }
    }
    TypeWords::count(words)?
        .arithmetic()
        .ok_or_else(|| not_a_c_type(words, span))
}

/// The type one word names on its own: a built-in type spelt in one word
/// (`double`, `size_t`, `uint8_t`, `_Bool` or `bool`) or a typedef's name.
/// `None` for a word that needs others (`unsigned`, `_Complex`).
fn one_word_type(w: &str) -> Option<BaseType> {
    if w == "bool" {
        return Some(BaseType::Bool);
    }
    if let Some(b) = BaseType::BUILTIN.iter().find(|b| b.c_name() == w) {
        return Some(b.clone());
    }
    (!is_type_word(w)).then(|| BaseType::Named(w.to_string()))
}

fn not_a_c_type(words: &[&DeclToken], span: Span) -> Diagnostic {
    let text: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    Diagnostic::new(format!("`{}` is not a C type", text.join(" ")), span)
        .with_hint("supported: void, char, short, int, long, long long (signed/unsigned), float, double, long double, float/double _Complex, size_t, int64_t, ...")
}

/// How often each word of C's arithmetic types stands in a declaration, in
/// any order (`long unsigned long int`: unsigned 1, long 2, int 1).
struct TypeWords<'w>(BTreeMap<&'w str, usize>);

impl<'w> TypeWords<'w> {
    /// Refuses a word that cannot be combined with others (`size_t`, a
    /// typedef's name).
    fn count(words: &[&'w DeclToken]) -> Built<Self> {
        let mut count = BTreeMap::<&str, usize>::new();
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
                                "void", "char", "short", "int", "long", "float", "double",
                                "unsigned",
                            ],
                        )
                        .unwrap_or_else(|| {
                            "a typedef name must be the only word of its type".into()
                        }),
                    ))
                }
            };
            *count.entry(key).or_default() += 1;
        }
        Ok(TypeWords(count))
    }

    fn n(&self, word: &str) -> usize {
        self.0.get(word).copied().unwrap_or(0)
    }

    /// The arithmetic type the words spell, `None` when they spell none
    /// (`signed unsigned`, `long float`).
    fn arithmetic(&self) -> Option<BaseType> {
        use BaseType::*;
        let n = |k: &str| self.n(k);
        let total: usize = self.0.values().sum();
        let unsigned = n("unsigned") > 0;
        let signed = n("signed") > 0;
        if n("unsigned") > 1 || n("signed") > 1 || (unsigned && signed) {
            return None;
        }
        let sign_words = n("unsigned") + n("signed");
        // `short`, `long` and `long long` may be followed by `int`, as may a
        // sign alone.
        let with_int = |words: usize| total == words + sign_words + n("int") && n("int") <= 1;
        let pick = |u: BaseType, s: BaseType| if unsigned { u } else { s };
        Some(if n("void") == 1 && total == 1 {
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
            if signed {
                SignedChar
            } else {
                pick(UnsignedChar, Char)
            }
        } else if n("short") == 1 && with_int(1) {
            pick(UnsignedShort, Short)
        } else if n("long") == 1 && with_int(1) {
            pick(UnsignedLong, Long)
        } else if n("long") == 2 && with_int(2) {
            pick(UnsignedLongLong, LongLong)
        } else if n("int") <= 1 && total == n("int") + sign_words && total >= 1 {
            pick(UnsignedInt, Int)
        } else {
            return None;
        })
    }
}
