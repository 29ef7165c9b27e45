//! The one output contract of every command that prints a report:
//! `--format` with exactly the values that command writes, `--out FILE`
//! written atomically, and tdg's JSON documents carrying a top-level
//! `"version"` (`formats::JSON_VERSION`). `--json` stays as a hidden alias
//! of `--format json` for the scripts that use it.

use std::path::PathBuf;

/// A command's `--format` values: a clap value enum with one variant for
/// people (the default) and one for tdg's JSON.
pub trait ReportFormat: clap::ValueEnum + Clone + Copy + PartialEq + Send + Sync + 'static {
    /// What the command prints without `--format`.
    const FOR_PEOPLE: Self;
    /// tdg's versioned JSON (what `--json` selects).
    const JSON: Self;
}

/// Declares a command's `--format` values: a clap value enum whose first
/// variant is for people and whose second is tdg's JSON (each variant's
/// doc comment is its `--help` line), and its [`ReportFormat`].
macro_rules! report_format {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(#[$people_doc:meta])* $people:ident,
            $(#[$json_doc:meta])* $json:ident,
            $($(#[$other_doc:meta])* $other:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
        $vis enum $name {
            $(#[$people_doc])* $people,
            $(#[$json_doc])* $json,
            $($(#[$other_doc])* $other,)*
        }

        impl $crate::args::output::ReportFormat for $name {
            const FOR_PEOPLE: Self = $name::$people;
            const JSON: Self = $name::$json;
        }
    };
}
pub(crate) use report_format;

/// `--format`, `--out` and the hidden `--json` of a command whose formats
/// are `F`.
#[derive(clap::Args, Clone, Debug)]
pub struct OutputArgs<F: ReportFormat> {
    /// Output format (without it: the first value, for people).
    #[arg(long, value_enum, help_heading = "Output")]
    pub format: Option<F>,
    /// Write the output to FILE (atomically: whole or not at all) instead of stdout.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Same as --format json (kept for scripts).
    #[arg(long, hide = true, conflicts_with = "format")]
    pub json: bool,
}

impl<F: ReportFormat> OutputArgs<F> {
    /// The format chosen by `--format`, `--json` or neither.
    pub fn chosen(&self) -> F {
        match (self.format, self.json) {
            (Some(f), _) => f,
            (None, true) => F::JSON,
            (None, false) => F::FOR_PEOPLE,
        }
    }

    pub fn is_json(&self) -> bool {
        self.chosen() == F::JSON
    }

    /// Writes the finished document to `--out` or stdout.
    pub fn write(&self, text: &str) -> anyhow::Result<()> {
        formats::write_document(self.out.as_deref(), text)?;
        Ok(())
    }

    /// Writes `value` as a versioned JSON document, or `table()` for people.
    pub fn write_report<T: serde::Serialize>(
        &self,
        value: &T,
        table: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        let text = if self.is_json() {
            formats::json_document("report", value)?
        } else {
            table()
        };
        self.write(&text)
    }
}

report_format! {
    /// The formats of a command that writes a table for people or tdg's JSON.
    pub enum TableOrJson {
        /// For people.
        Table,
        /// tdg's JSON, with a top-level "version" (docs/integration.md).
        Json,
    }
}

/// `--format table|json` and `--out`.
pub type TableOrJsonOutput = OutputArgs<TableOrJson>;
