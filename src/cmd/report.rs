//! `tdg report PATH... -o report.html`: one self-contained HTML page for
//! campaigns, tune logs, profiles, probe results, checkpoint reports and
//! runs; `--watch DIR` keeps it current while a campaign runs.
use super::CmdResult;
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[derive(clap::Args)]
pub struct Args {
    /// What to show: campaign directories, tune logs (.jsonl), profiles
    /// (.tdgp), probe results (probe.json), and the JSON of `tdg run`,
    /// `tdg checkpoint time`/`inapp`/`capture --auto-delay` or Google
    /// Benchmark (several runs are compared side by side).
    #[arg(value_name = "PATH", required_unless_present = "watch")]
    pub paths: Vec<PathBuf>,
    /// The page to write (replaced atomically; an existing file is
    /// replaced only if tdg wrote it).
    #[arg(
        short = 'o',
        long = "out",
        value_name = "FILE",
        default_value = "report.html"
    )]
    pub out: PathBuf,
    /// A campaign directory (or tune log) to follow: the page is rewritten
    /// whenever it changes and reloads itself in the browser; Ctrl-C
    /// writes the final page and stops.
    #[arg(long, value_name = "DIR")]
    pub watch: Option<PathBuf>,
    /// Seconds between looks at the watched campaign (and the page's reloads).
    #[arg(long, value_name = "SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub interval: u32,
}

pub fn run(args: Args) -> CmdResult {
    match &args.watch {
        Some(dir) => watch(&args, dir),
        None => {
            let sections = write(&args.paths, &args.out, None)?;
            eprintln!("tdg: wrote {} ({sections} sections)", args.out.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads every input and writes the page; returns the number of sections.
fn write(paths: &[PathBuf], out: &Path, reload_s: Option<u32>) -> anyhow::Result<usize> {
    Ok(report::write_report(paths, out, reload_s, "tdg report")?)
}

/// What changes when a campaign records an evaluation: its log and its
/// results directory (sizes and modification times).
fn signature(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out = Vec::new();
    let mut look = |p: PathBuf| {
        if let Ok(m) = std::fs::metadata(&p) {
            out.push((p, m.len(), m.modified().ok()));
        }
    };
    if dir.is_dir() {
        look(dir.join("tune.jsonl"));
        look(dir.join("results"));
        if let Ok(entries) = std::fs::read_dir(dir.join("results")) {
            let mut names: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            names.sort();
            for n in names {
                look(n);
            }
        }
    } else {
        look(dir.to_path_buf());
    }
    out
}

fn watch(args: &Args, dir: &Path) -> CmdResult {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("cannot watch for Ctrl-C")?;
    }
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(args.paths.iter().cloned());
    let mut last = None;
    let mut shown_error = String::new();
    eprintln!(
        "tdg: watching {}: {} is rewritten as the campaign changes; Ctrl-C writes the final page and stops",
        dir.display(),
        args.out.display()
    );
    while !stop.load(Ordering::Relaxed) {
        let now = signature(dir);
        if last.as_ref() != Some(&now) {
            // A campaign still being created (no manifest yet) or a log
            // line being written is seen again at the next look.
            match write(&paths, &args.out, Some(args.interval)) {
                Ok(_) => {
                    last = Some(now);
                    shown_error.clear();
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    if msg != shown_error {
                        eprintln!("tdg: not yet: {msg}");
                        shown_error = msg;
                    }
                }
            }
        }
        let until = std::time::Instant::now() + Duration::from_secs(u64::from(args.interval));
        while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let sections = write(&paths, &args.out, None)?;
    eprintln!(
        "tdg: wrote the final {} ({sections} sections)",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
