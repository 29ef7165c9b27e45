//! `tdg tune --format json`: the outcome written as every tdg JSON document
//! is ([`crate::json_document`]: keys in alphabetical order, a top-level
//! `"version"`), but with each configuration's parameters in the order
//! `--param` gave them, as the evaluation log and the table have them.

use crate::document::JSON_VERSION;
use config::Config;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};
use tune::TuneOutcome;

/// The outcome as one JSON document.
pub fn tune_outcome_document(outcome: &TuneOutcome) -> serde_json::Result<String> {
    let Value::Object(mut fields) = serde_json::to_value(outcome)? else {
        // A struct is an object; should that change, the outcome stays whole.
        return crate::json_document("outcome", outcome);
    };
    fields.insert("version".into(), JSON_VERSION.into());
    let document = OutcomeDocument {
        fields,
        best: &outcome.search.best,
        tied: &outcome.search.tied,
        finalists: &outcome.search.finalists,
    };
    Ok(serde_json::to_string_pretty(&document)? + "\n")
}

/// The outcome's fields as a `serde_json::Value` object keeps them
/// (alphabetical), with the configurations written from the outcome itself:
/// through a `Value` their names would be sorted too.
struct OutcomeDocument<'a> {
    fields: Map<String, Value>,
    best: &'a Config,
    tied: &'a [Config],
    finalists: &'a [Config],
}

impl Serialize for OutcomeDocument<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for (key, value) in &self.fields {
            match key.as_str() {
                "best" => map.serialize_entry(key, self.best)?,
                "tied" => map.serialize_entry(key, self.tied)?,
                "finalists" => map.serialize_entry(key, self.finalists)?,
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(best: Config, tied: Vec<Config>) -> TuneOutcome {
        TuneOutcome {
            search: tune::Outcome {
                best_description: best.to_string(),
                best,
                best_ns: 12.5,
                best_uncertainty_pct: Some(1.5),
                tied,
                finalists: Vec::new(),
                noise_pct: Some(2.0),
                best_mflops: None,
                evaluations: 4,
                failed: 0,
                space_size: 4,
                budget: 4,
                starts: vec!["Z=2 A=1 (mid-range, --no-model)".into()],
                seconds: 0.5,
                time_split: tune::TimeSplit::default(),
                split_evaluations: 0,
                model: None,
            },
            log: "k.tune.jsonl".into(),
            campaign: None,
            strategy: tune::Strategy::Exhaustive,
            roles: tune::Roles::default(),
            constraints: Vec::new(),
            unconstrained_size: 4,
            machine: None,
            contexts: None,
            started: std::time::SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn configurations_keep_the_order_of_param_and_the_rest_is_alphabetical() {
        let best = Config::from_pairs([("Z", 2), ("A", 1)]).unwrap();
        let tied = vec![Config::from_pairs([("Z", 4), ("A", 3)]).unwrap()];
        let mut o = outcome(best, tied);
        o.search.finalists = vec![Config::from_pairs([("Z", 6), ("A", 5)]).unwrap()];
        let text = tune_outcome_document(&o).unwrap();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing in {text}"))
        };
        // --param Z then A: Z first, in the best, every tie and finalist.
        assert!(at("\"Z\": 2") < at("\"A\": 1"), "{text}");
        assert!(at("\"Z\": 4") < at("\"A\": 3"), "{text}");
        assert!(at("\"Z\": 6") < at("\"A\": 5"), "{text}");
        // Everything else is the document json_document writes, byte for
        // byte, once the configurations' names are sorted back.
        let mut sorted = o.clone();
        sorted.search.best = Config::from_pairs([("A", 1), ("Z", 2)]).unwrap();
        sorted.search.tied = vec![Config::from_pairs([("A", 3), ("Z", 4)]).unwrap()];
        sorted.search.finalists = vec![Config::from_pairs([("A", 5), ("Z", 6)]).unwrap()];
        assert_eq!(
            tune_outcome_document(&sorted).unwrap(),
            crate::json_document("outcome", &o).unwrap()
        );
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["version"], JSON_VERSION);
        assert_eq!(parsed["best"]["A"], 1);
    }
}
