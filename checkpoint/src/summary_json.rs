//! How checkpoint reports write a [`stats::Summary`]: `{n, min, median,
//! mean, max}`, the shape `tdg checkpoint ... --json` has always printed
//! (scripts read it), so the shared type's standard deviation stays out.
//! Use with `#[serde(with = "crate::summary_json")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use stats::Summary;

#[derive(Serialize, Deserialize)]
struct SummaryJson {
    n: usize,
    min: f64,
    median: f64,
    mean: f64,
    max: f64,
}

pub fn serialize<S: Serializer>(s: &Summary, to: S) -> Result<S::Ok, S::Error> {
    SummaryJson {
        n: s.n,
        min: s.min,
        median: s.median,
        mean: s.mean,
        max: s.max,
    }
    .serialize(to)
}

/// The standard deviation was not written, so it reads back as NaN.
pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Summary, D::Error> {
    let j = SummaryJson::deserialize(from)?;
    Ok(Summary {
        n: j.n,
        min: j.min,
        median: j.median,
        mean: j.mean,
        max: j.max,
        stddev: f64::NAN,
    })
}
