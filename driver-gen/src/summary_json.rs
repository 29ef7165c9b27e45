//! How the driver's JSON line and `tdg run --json` write a
//! [`stats::Summary`]: `{min, median, mean, max, stddev}` (driver JSON
//! contract v2, docs/drivers.md). The count is not in this object: the
//! samples stand beside it (`samples_ns`), so reading one back gives
//! `n = 0` and the reader sets it from them ([`crate::run`] does).
//! Use with `#[serde(with = "crate::summary_json")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use stats::Summary;

#[derive(Serialize, Deserialize)]
struct SummaryJson {
    min: f64,
    median: f64,
    mean: f64,
    max: f64,
    stddev: f64,
}

pub fn serialize<S: Serializer>(s: &Summary, to: S) -> Result<S::Ok, S::Error> {
    SummaryJson {
        min: s.min,
        median: s.median,
        mean: s.mean,
        max: s.max,
        stddev: s.stddev,
    }
    .serialize(to)
}

pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Summary, D::Error> {
    let j = SummaryJson::deserialize(from)?;
    Ok(Summary {
        n: 0,
        min: j.min,
        median: j.median,
        mean: j.mean,
        max: j.max,
        stddev: j.stddev,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Line {
        #[serde(with = "crate::summary_json")]
        stats: Summary,
    }

    #[test]
    fn reads_and_writes_the_contract_v2_stats_object_unchanged() {
        let text = r#"{"stats":{"min":14001.2,"median":14752.0,"mean":14798.5,"max":15298.0,"stddev":465.1}}"#;
        let line: Line = serde_json::from_str(text).unwrap();
        assert_eq!(line.stats.stddev, 465.1);
        assert_eq!(serde_json::to_string(&line).unwrap(), text);
    }
}
