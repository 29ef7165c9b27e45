//! Serde for spec-lang's keyword enums as the words the driver, the spec
//! and the command line write (`cycle`, `median`, `read`): the driver's JSON
//! line and the run report both carry them so.

use serde::{Deserialize, Deserializer, Serializer};
use spec_lang::vocabulary::Keyword;

pub fn serialize<K: Keyword, S: Serializer>(k: &K, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.spelling())
}

pub fn deserialize<'de, K: Keyword, D: Deserializer<'de>>(d: D) -> Result<K, D::Error> {
    let word = String::deserialize(d)?;
    K::from_spelling(&word).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`{word}` is not a {} (one of {})",
            K::FAMILY,
            K::spellings().join(", ")
        ))
    })
}
