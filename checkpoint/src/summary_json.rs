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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Report {
        #[serde(with = "crate::summary_json")]
        region_ns: Summary,
    }

    #[test]
    fn writes_and_reads_the_shape_checkpoint_reports_always_had() {
        let text = r#"{"region_ns":{"n":4,"min":1.0,"median":2.5,"mean":2.5,"max":4.0}}"#;
        let written = Report {
            region_ns: Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap(),
        };
        assert_eq!(serde_json::to_string(&written).unwrap(), text);
        let read: Report = serde_json::from_str(text).unwrap();
        assert_eq!(read.region_ns.median, 2.5);
        assert!(read.region_ns.stddev.is_nan());
    }
}
