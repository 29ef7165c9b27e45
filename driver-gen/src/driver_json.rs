//! The driver's JSON contract: the one line a generated driver prints with
//! `--json`, its format version, and the reader that refuses any other
//! version with the way out. The model stamps [`DRIVER_JSON_VERSION`] into
//! the driver it describes; `run` reads the line back with [`parse`] into
//! the run record ([`crate::record`]); the
//! table in docs/drivers.md describes each field.

use crate::record::RunReport;

/// Version of the driver's `--json` line (its `tdg_driver` field), the
/// contract between a generated driver and the tdg that reads it; the table
/// in docs/drivers.md describes each field. Bump it when a field changes
/// meaning or goes away (new fields alone do not need a bump).
///
/// Version 2: the sample count is the driver's to choose (adaptive
/// sampling), the timer overhead is measured through the timed path, and
/// the stability fields (`uncertainty_pct`, `stable`, `sampling`) exist.
pub const DRIVER_JSON_VERSION: u32 = 2;

/// The driver's `--json` line, checked against [`DRIVER_JSON_VERSION`],
/// read into the run record (what the driver measured; the caller settles
/// the build and the settings, [`RunReport::settle`]); the error says why
/// it is not one this tdg reads, and what to do.
pub fn parse(line: &str) -> Result<RunReport, String> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    match value.get("tdg_driver").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(DRIVER_JSON_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "report format version {v}, this tdg reads version {DRIVER_JSON_VERSION}; regenerate the driver with this tdg (`tdg gen`)"
            ))
        }
        None => return Err("no `tdg_driver` format version".into()),
    }
    serde_json::from_value(value)
        .map(RunReport::count_samples)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_another_format_version_is_refused_with_the_way_out() {
        let e = parse(r#"{"tdg_driver":99,"routine":"f"}"#).unwrap_err();
        let msg = e;
        assert!(msg.contains("report format version 99"), "{msg}");
        assert!(msg.contains("regenerate the driver"), "{msg}");
        let e = parse(r#"{"routine":"f"}"#).unwrap_err();
        assert!(e.contains("no `tdg_driver`"), "{e}");
    }
}
