//! A command's document: the format it is written in, tdg's versioned JSON,
//! and why a document could not be made.

/// The version of every JSON document tdg prints (`--format json`), its
/// top-level `"version"`: fields are only added within a version; a rename,
/// removal or change of meaning raises it (changelog in docs/integration.md).
pub const JSON_VERSION: u32 = 2;

/// `value` as one of tdg's JSON documents: pretty-printed, with the
/// top-level `"version"` ([`JSON_VERSION`]). A value that is not a JSON
/// object (a list of reports), or that carries a `"version"` of its own (a
/// probe record, versioned as the cache it is kept in), is put under `key`
/// whole, so neither version hides the other.
pub fn json_document<T: serde::Serialize>(key: &str, value: &T) -> serde_json::Result<String> {
    let mut object = match serde_json::to_value(value)? {
        serde_json::Value::Object(map) if !map.contains_key("version") => map,
        other => {
            let mut map = serde_json::Map::new();
            map.insert(key.to_string(), other);
            map
        }
    };
    object.insert("version".into(), JSON_VERSION.into());
    Ok(serde_json::to_string_pretty(&object)? + "\n")
}

/// How a command prints its result (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people.
    Table,
    /// tdg's own JSON (the versioned contract in docs/integration.md).
    Json,
    /// One row per report.
    Csv,
    /// Google Benchmark JSON (`compare.py` and dashboards read it).
    Gbench,
    /// T4 tuning results (Kernel Tuner's open autotuning schema).
    T4,
}

impl Format {
    /// The format chosen by `--format` or by the older `--json`/`--csv`
    /// switches, which stay as aliases.
    pub fn chosen(format: Option<Format>, json: bool, csv: bool) -> Format {
        match (format, json, csv) {
            (Some(f), _, _) => f,
            (None, true, _) => Format::Json,
            (None, _, true) => Format::Csv,
            _ => Format::Table,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Gbench => "gbench",
            Format::T4 => "t4",
        }
    }
}

/// A format the command does not produce, with the ones it does.
pub fn unsupported(command: &str, format: Format, supported: &[Format]) -> String {
    format!(
        "`{command}` cannot write --format {}; it writes {}",
        format.name(),
        supported
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Why a command's document could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The command does not write the format asked for (a usage error,
    /// [`unsupported`] says which it writes).
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// What the document says about the run could not be found out (Google
    /// Benchmark's context names the running executable).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The document of a command that writes only a table or tdg's JSON
/// (`tdg probe`, `tdg checkpoint time`, the `--contexts` and checkpoint
/// paths of `tdg run`); other formats are a usage error naming both.
pub fn table_or_json<T: serde::Serialize>(
    command: &str,
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> Result<String, DocumentError> {
    match format {
        Format::Table => Ok(table()),
        Format::Json => Ok(json_document("report", value)?),
        other => Err(DocumentError::Unsupported(unsupported(
            command,
            other,
            &[Format::Table, Format::Json],
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_document_carries_the_version_at_the_top() {
        let v: serde_json::Value =
            serde_json::from_str(&super::json_document("reports", &[1, 2]).unwrap()).unwrap();
        assert_eq!(v["version"], super::JSON_VERSION);
        assert_eq!(v["reports"][1], 2);
        let v: serde_json::Value =
            serde_json::from_str(&super::json_document("x", &serde_json::json!({"a": 1})).unwrap())
                .unwrap();
        assert_eq!((v["a"].as_u64(), v["version"].as_u64()), (Some(1), Some(2)));
        let v: serde_json::Value = serde_json::from_str(
            &super::json_document("probe", &serde_json::json!({"version": 7})).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (v["probe"]["version"].as_u64(), v["version"].as_u64()),
            (Some(7), Some(2))
        );
    }
}
