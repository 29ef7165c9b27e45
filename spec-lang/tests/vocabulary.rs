//! docs/spec-language.md names every keyword of the language, and every
//! keyword family parses from its own spellings (one vocabulary, read by the
//! parser, the formatter and the command line).

use spec_lang::ast::{FlushMethod, Selection, TimerMethod};
use spec_lang::vocabulary::{families, Keyword};

#[test]
fn the_language_doc_names_every_keyword() {
    let doc = include_str!("../../docs/spec-language.md");
    let is_word_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mentions = |word: &str| {
        doc.match_indices(word).any(|(i, _)| {
            let before = doc[..i].chars().next_back();
            let after = doc[i + word.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
    };
    let missing: Vec<String> = families()
        .into_iter()
        .flat_map(|(family, words)| {
            words
                .into_iter()
                .filter(|w| !mentions(w))
                .map(move |w| format!("{family} `{w}`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/spec-language.md does not mention: {}",
        missing.join(", ")
    );
}

fn round_trips<K: Keyword + std::fmt::Debug>() {
    for k in K::ALL {
        assert_eq!(K::from_spelling(k.spelling()), Some(*k));
        assert!(!k.help().is_empty());
    }
    assert_eq!(K::from_spelling("no-such-keyword"), None);
}

#[test]
fn every_keyword_reads_back_from_its_spelling_in_a_spec() {
    round_trips::<TimerMethod>();
    round_trips::<Selection>();
    round_trips::<FlushMethod>();
    for m in TimerMethod::ALL {
        for s in Selection::ALL {
            for f in FlushMethod::ALL {
                let src = format!(
                    "routine=void f(const int N);\ninit={{ N=1; }};\ntimer={{ method={}; select={}; flush={}; }};\n",
                    m.spelling(),
                    s.spelling(),
                    f.spelling()
                );
                let spec = spec_lang::check_source(&src, "t.spec", &[])
                    .and_then(|c| c.for_use(spec_lang::Use::Driver))
                    .unwrap_or_else(|d| panic!("{d}"));
                let t = spec.timer.as_ref().unwrap();
                assert_eq!(
                    (t.method, t.select, t.flush),
                    (Some(*m), Some(*s), Some(*f))
                );
                // The formatter writes the same spellings back.
                assert!(spec_lang::format(&spec).contains(&format!("method={};", m.spelling())));
            }
        }
    }
}
