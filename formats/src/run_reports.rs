//! `tdg run`'s reports, one or a flush sweep's, in the format asked for.

use crate::gbench::{self, RunIdentity};
use crate::{DocumentError, Format};
use driver_gen::report::{format_csv_row, format_sweep, format_table, CSV_HEADER};
use driver_gen::RunReport;

/// The document for `reports` (at least one). `identity` names the run in
/// Google Benchmark's context and is asked for only by that format.
pub fn render(
    reports: &[RunReport],
    format: Format,
    identity: impl FnOnce() -> std::io::Result<RunIdentity>,
) -> Result<String, DocumentError> {
    Ok(match format {
        Format::Json if reports.len() == 1 => crate::json_document("report", &reports[0])?,
        Format::Json => crate::json_document("reports", &reports)?,
        Format::Csv => std::iter::once(CSV_HEADER.to_string())
            .chain(reports.iter().map(format_csv_row))
            .map(|l| l + "\n")
            .collect(),
        Format::Gbench => {
            let probe = probe::load_cached_from(&probe::cache_path()).ok().flatten();
            let doc = gbench::document(
                reports,
                &identity()?,
                &crate::machine::this_machine(),
                probe.as_ref(),
                &crate::machine::date_now(),
            );
            serde_json::to_string_pretty(&doc)? + "\n"
        }
        Format::T4 => {
            return Err(DocumentError::Unsupported(crate::unsupported(
                "tdg run",
                format,
                &[Format::Table, Format::Json, Format::Csv, Format::Gbench],
            )))
        }
        Format::Table if reports.len() > 1 => {
            let mut s = format_sweep(reports);
            for w in &reports[0].warnings {
                s.push_str(&format!("warning: {w}\n"));
            }
            s
        }
        Format::Table => format_table(&reports[0]),
    })
}
