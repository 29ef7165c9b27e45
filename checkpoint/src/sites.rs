//! `tdg checkpoint sites -- CMD`: run the application once with every marked
//! site timed and list each site's call count and per-call time
//! distribution, so a user can choose `--site` and `--call` without guessing.

use crate::env;
use crate::error::{io_err, CheckpointError, Result};
use stats::Summary;
use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One site's calls in the census run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SiteSummary {
    pub site: String,
    pub calls: u64,
    pub total_ns: f64,
    #[serde(with = "crate::summary_json")]
    pub ns: Summary,
    pub p90_ns: f64,
    /// The slowest calls, (1-based call number, ns), slowest first.
    pub slowest: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SitesReport {
    pub sites: Vec<SiteSummary>,
    /// More calls than the host library keeps (2^20): later ones are missing.
    pub truncated: bool,
}

impl SitesReport {
    pub fn render_text(&self) -> String {
        let mut s = format!(
            "{:<24} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}  slowest calls\n",
            "site", "calls", "total", "min", "median", "p90", "max"
        );
        for site in &self.sites {
            let slowest = site
                .slowest
                .iter()
                .map(|(call, ns)| format!("#{call} {}", stats::ns(*ns as f64)))
                .collect::<Vec<_>>()
                .join(", ");
            s += &format!(
                "{:<24} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n",
                site.site,
                site.calls,
                stats::ns(site.total_ns),
                stats::ns(site.ns.min),
                stats::ns(site.ns.median),
                stats::ns(site.p90_ns),
                stats::ns(site.ns.max),
                slowest
            );
        }
        if self.truncated {
            s += "(more than 2^20 calls: the census kept the first ones)\n";
        }
        s
    }
}

/// Parse the host library's census file.
pub fn parse_census(text: &str) -> std::result::Result<SitesReport, String> {
    let mut names: Vec<String> = Vec::new();
    let mut calls: Vec<Vec<(u64, u64)>> = Vec::new();
    let mut truncated = false;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("site ") {
            names.push(name.to_string());
            calls.push(Vec::new());
        } else if let Some(rest) = line.strip_prefix("call ") {
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|v| v.parse::<i64>().map(|n| n.max(0) as u64))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| format!("bad census line {line:?}"))?;
            let [site, call, ns] = f[..] else {
                return Err(format!("bad census line {line:?}"));
            };
            calls
                .get_mut(site as usize)
                .ok_or_else(|| format!("census line {line:?} names no site"))?
                .push((call, ns));
        } else if line == "overflow" {
            truncated = true;
        }
    }
    let sites = names
        .into_iter()
        .zip(calls)
        .filter(|(_, c)| !c.is_empty())
        .map(|(site, c)| {
            let times: Vec<f64> = c.iter().map(|&(_, ns)| ns as f64).collect();
            let mut sorted = times.clone();
            sorted.sort_by(f64::total_cmp);
            let p90 = sorted[((sorted.len() - 1) as f64 * 0.9).round() as usize];
            let mut slowest = c.clone();
            slowest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            slowest.truncate(3);
            SiteSummary {
                site,
                calls: c.len() as u64,
                total_ns: times.iter().sum(),
                ns: Summary::of(&times).expect("non-empty"),
                p90_ns: p90,
                slowest,
            }
        })
        .collect();
    Ok(SitesReport { sites, truncated })
}

/// Run `command` once with the census on.
pub fn list_sites(command: &[OsString], timeout: Option<Duration>) -> Result<SitesReport> {
    let (program, args) = command.split_first().ok_or_else(|| {
        CheckpointError::InvalidRequest("give the application to run after `--`".into())
    })?;
    let scratch =
        toolchain::scratch_dir("tdg-sites").map_err(io_err("cannot create a scratch directory"))?;
    let file = scratch.path().join("census.txt");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(env::SITES, &file)
        .env_remove(env::IMAGE)
        .env_remove(env::REPORT)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match crate::tsc::region_tsc_ghz() {
        Some(g) => cmd.env(env::TSC_GHZ, g.to_string()),
        None => cmd.env_remove(env::TSC_GHZ),
    };
    toolchain::run(&mut cmd, timeout)?;
    let text = std::fs::read_to_string(&file).map_err(|_| {
        CheckpointError::NotCaptured(format!(
            "{} wrote no site census: it marks no region with tdg_region_begin/tdg_region_end, \
             is not built with this tdg_checkpoint.c (`tdg checkpoint lib`), or ended with _exit()",
            program.to_string_lossy()
        ))
    })?;
    parse_census(&text).map_err(CheckpointError::InvalidRequest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn census_is_summarised_per_site() {
        let text = "site a\nsite b\ncall 0 1 100\ncall 1 1 5\ncall 0 2 300\ncall 0 3 200\n";
        let r = parse_census(text).unwrap();
        assert_eq!(r.sites.len(), 2);
        let a = &r.sites[0];
        assert_eq!((a.calls, a.ns.median, a.total_ns), (3, 200.0, 600.0));
        assert_eq!(a.slowest, [(2, 300), (3, 200), (1, 100)]);
        assert!(!r.truncated);
        assert!(parse_census("call 5 1 1\n").is_err());
    }
}
