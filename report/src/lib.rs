//! Reports people look at: one self-contained HTML page (styles and plots
//! inline, nothing fetched) for any mix of tuning campaigns, profiles,
//! probe results, checkpoint reports and runs, and the standalone SVG
//! plots `tdg probe --svg` and `tdg profile report --svg` write.
//!
//! Data flows input files → [`input::Input`] (read through the owning
//! crate's types) → [`html::Section`]s (tables and [`chart::Chart`]s, each
//! described as data and drawn by plotters) → one page.

pub mod autotune_section;
pub mod campaign;
pub mod chart;
pub mod checkpoint_section;
pub mod compare;
pub mod cpu_section;
pub mod html;
pub mod input;
pub mod probe_section;
pub mod profile_section;
pub mod runs;
pub mod strategy_section;

pub use html::{PageOptions, Section};
pub use input::{load, Input, InputError};

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
    #[error("{path} exists and is not a page tdg report wrote; choose another -o or move it away")]
    NotOurs { path: String },
    #[error("{path}: {why}")]
    Write { path: String, why: String },
}

/// The page's sections for `inputs`, in the order given, except that
/// checkpoint reports of one application are shown together, and runs
/// (and checkpoint timings) from several files are also compared side by
/// side.
pub fn sections(inputs: &[Input]) -> Result<Vec<Section>, ReportError> {
    let mut out = Vec::new();
    let mut n = 0;
    let mut next_id = |kind: &str| {
        n += 1;
        format!("{kind}-{n}")
    };
    let mut checkpoint_done = false;
    for input in inputs {
        match input {
            Input::Campaign(c) => out.push(campaign::section(&next_id("campaign"), c)?),
            Input::Profile(p) => out.push(profile_section::section(&next_id("profile"), p)?),
            Input::Probe(p) => out.push(probe_section::section(&next_id("probe"), p)?),
            Input::CheckpointTime(_) | Input::AutoDelay(_) | Input::InApp(_) => {
                if !checkpoint_done {
                    checkpoint_done = true;
                    out.push(checkpoint_section::section(&next_id("checkpoint"), inputs)?);
                }
            }
            Input::Runs(_) => {}
            Input::Autotune(r) => out.push(autotune_section::section(&next_id("autotune"), r)?),
            Input::StrategyCurves(c) => {
                out.push(strategy_section::section(&next_id("strategies"), c)?)
            }
        }
    }
    let timed = runs::timed_files(inputs);
    if !timed.is_empty() && (timed.len() > 1 || inputs.iter().any(|i| matches!(i, Input::Runs(_))))
    {
        out.push(runs::section(&next_id("runs"), &timed)?);
    }
    Ok(out)
}

/// The page's title: what it shows.
pub fn title(inputs: &[Input]) -> String {
    let mut kinds: Vec<&str> = inputs
        .iter()
        .map(|i| match i {
            Input::Campaign(_) => "campaign",
            Input::Profile(_) => "profile",
            Input::Probe(_) => "probe",
            Input::CheckpointTime(_) | Input::AutoDelay(_) | Input::InApp(_) => "checkpoint",
            Input::Runs(_) => "runs",
            Input::Autotune(_) => "autotune",
            Input::StrategyCurves(_) => "search strategies",
        })
        .collect();
    kinds.dedup();
    format!("tdg report: {}", kinds.join(", "))
}

/// The whole page for `inputs`.
pub fn render(inputs: &[Input], opts: &PageOptions) -> Result<String, ReportError> {
    Ok(html::page(opts, &sections(inputs)?))
}

/// Reads every input, writes their page to `out` and returns how many
/// sections it has; `by` names the command that wrote it, `reload_s` makes
/// the page reload itself (a campaign being watched).
pub fn write_report(
    paths: &[std::path::PathBuf],
    out: &Path,
    reload_s: Option<u32>,
    by: &str,
) -> Result<usize, ReportError> {
    let inputs = paths
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let sections = sections(&inputs)?;
    let opts = PageOptions {
        title: title(&inputs),
        reload_s,
        generated: format!(
            "Written by {by} (tdg {}) on {} from {}.",
            env!("CARGO_PKG_VERSION"),
            formats::machine::date_now(),
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    write_page(out, &html::page(&opts, &sections))?;
    Ok(sections.len())
}

/// Marks the pages this crate writes, so rewriting one is safe and any
/// other file at that path is refused.
pub const GENERATOR_MARK: &str = "<meta name=\"generator\" content=\"tdg ";

/// Writes `page` to `path` atomically (readers never see half a page;
/// an interrupted write leaves the previous page; a link there is refused).
/// A file already there is replaced only if it is a page tdg wrote.
pub fn write_page(path: &Path, page: &str) -> Result<(), ReportError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() || !m.is_file() => {
            return Err(ReportError::NotOurs {
                path: path.display().to_string(),
            })
        }
        Ok(_) => {
            let head = read_head(path);
            if !head.contains(GENERATOR_MARK) {
                return Err(ReportError::NotOurs {
                    path: path.display().to_string(),
                });
            }
        }
        Err(_) => {}
    }
    fsguard::write_atomic(path, page.as_bytes()).map_err(|e| ReportError::Write {
        path: path.display().to_string(),
        why: e.to_string(),
    })
}

fn read_head(path: &Path) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; 4096];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut buf))
        .unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}
