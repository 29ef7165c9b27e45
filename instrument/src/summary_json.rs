//! How instrument's JSON (`tdg profile report --json`, `tdg validate
//! --json`) writes a [`stats::Summary`]: `{calls, min_ns, median_ns,
//! mean_ns}`, the names it has always had (tests and scripts read them).

use serde::{Serialize, Serializer};
use stats::Summary;

#[derive(Serialize)]
struct SummaryJson {
    calls: u64,
    min_ns: f64,
    median_ns: f64,
    mean_ns: f64,
}

impl From<&Summary> for SummaryJson {
    fn from(s: &Summary) -> Self {
        SummaryJson {
            calls: s.n as u64,
            min_ns: s.min,
            median_ns: s.median,
            mean_ns: s.mean,
        }
    }
}

/// For `#[serde(serialize_with = "crate::summary_json::write")]`.
pub fn write<S: Serializer>(s: &Summary, to: S) -> Result<S::Ok, S::Error> {
    SummaryJson::from(s).serialize(to)
}

/// The same for an optional summary (`null` when absent).
pub fn write_option<S: Serializer>(s: &Option<Summary>, to: S) -> Result<S::Ok, S::Error> {
    s.as_ref().map(SummaryJson::from).serialize(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        #[serde(serialize_with = "write")]
        all: Summary,
        #[serde(serialize_with = "write_option")]
        early: Option<Summary>,
        #[serde(serialize_with = "write_option")]
        late: Option<Summary>,
    }

    #[test]
    fn writes_the_field_names_the_report_json_always_had() {
        let row = Row {
            all: Summary::of(&[5.0, 1.0, 3.0]).unwrap(),
            early: Summary::of(&[2.0]),
            late: None,
        };
        assert_eq!(
            serde_json::to_string(&row).unwrap(),
            r#"{"all":{"calls":3,"min_ns":1.0,"median_ns":3.0,"mean_ns":3.0},"early":{"calls":1,"min_ns":2.0,"median_ns":2.0,"mean_ns":2.0},"late":null}"#
        );
    }
}
