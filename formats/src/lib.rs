//! tdg's results in the formats other tools already read, and the contract
//! an external tuner relies on when it runs `tdg run` once per candidate.
//!
//! Each module is one job: [`contract`] says how an evaluation ended (exit
//! status, T4 invalidity), [`gbench`] writes Google Benchmark JSON from run
//! reports, [`t4`] writes T4 tuning results from evaluations, [`machine`]
//! describes this machine the way Google Benchmark's context does, and
//! [`output`] writes a document to stdout or atomically to a file.

pub mod contract;
pub mod gbench;
pub mod machine;
pub mod output;
pub mod t4;

pub use contract::{exit_status, Failure};
pub use output::write_document;

/// How a command prints its result (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

/// The document of a command that writes only a table or tdg's JSON
/// (`tdg probe`, `tdg checkpoint time`, the `--contexts` and checkpoint
/// paths of `tdg run`); other formats are a usage error naming both.
pub fn table_or_json<T: serde::Serialize>(
    command: &str,
    format: Format,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<String> {
    match format {
        Format::Table => Ok(table()),
        Format::Json => Ok(serde_json::to_string_pretty(value)? + "\n"),
        other => Err(contract::usage(unsupported(
            command,
            other,
            &[Format::Table, Format::Json],
        ))),
    }
}
