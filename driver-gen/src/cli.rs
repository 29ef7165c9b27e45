//! The command line's value parsers for the timing options, which
//! [`TimingOverrides`](crate::TimingOverrides) declares (feature `cli`): a
//! command line parses straight into the inputs of
//! [`model::timing::resolve`](crate::model::timing::resolve), with no
//! options struct copied into them. The spec language's keyword families
//! are option values with the same spellings and help as in specs
//! (`spec_lang::vocabulary`).

use clap::builder::{PossibleValue, TypedValueParser};
use spec_lang::vocabulary::Keyword;
use std::marker::PhantomData;

/// Parses one keyword of family `K`; `--help` lists each value with its help.
#[derive(Clone)]
pub struct KeywordParser<K>(PhantomData<K>);

/// The parser for `#[arg(value_parser = keyword::<K>())]` (the binary's
/// other keyword options use it too).
pub fn keyword<K>() -> KeywordParser<K> {
    KeywordParser(PhantomData)
}

impl<K: Keyword + Send + Sync> TypedValueParser for KeywordParser<K> {
    type Value = K;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<K, clap::Error> {
        let word = value.to_string_lossy();
        K::from_spelling(&word).ok_or_else(|| {
            let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            use clap::error::{ContextKind, ContextValue};
            if let Some(arg) = arg {
                e.insert(
                    ContextKind::InvalidArg,
                    ContextValue::String(arg.to_string()),
                );
            }
            e.insert(
                ContextKind::InvalidValue,
                ContextValue::String(word.into_owned()),
            );
            e.insert(
                ContextKind::ValidValue,
                ContextValue::Strings(K::spellings().iter().map(|s| s.to_string()).collect()),
            );
            e
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            K::ALL
                .iter()
                .map(|k| PossibleValue::new(k.spelling()).help(k.help())),
        ))
    }
}

/// A tolerance in per cent: a positive number.
pub fn positive_percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{text}` is not a positive percentage; e.g. 0.5")),
    }
}

/// `--first-touch WHO`: whether the main thread writes the operands' pages
/// first (`main`) instead of the threads that use them (`threads`).
pub fn first_touch_main() -> impl TypedValueParser<Value = bool> {
    clap::builder::PossibleValuesParser::new(["threads", "main"]).map(|who| who == "main")
}
