//! `tdg probe`: measure this machine's effective caches, TLB and timers.
use super::CmdResult;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print the result as JSON instead of a table (same as --format json).
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// Output format: table or json.
    #[arg(long, value_enum)]
    format: Option<formats::Format>,
    /// Write the output to FILE (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the latency-vs-buffer-size plot here (SVG).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Measure again even when a cached result exists.
    #[arg(long)]
    force: bool,
    /// Measure, but do not write the cache.
    #[arg(long)]
    no_save: bool,
    /// C compiler for the micro-benchmarks.
    #[arg(long, env = "CC")]
    cc: Option<String>,
    /// Largest buffer of the cache sweep, in MiB (default: 2x the documented LLC).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=65536))]
    max_buffer_mib: Option<u64>,
}

pub fn run(mut args: Args) -> CmdResult {
    let format = formats::Format::chosen(args.format, args.json, false);
    // Refused before measuring, not after; JSON keeps stderr quiet.
    formats::table_or_json("tdg probe", format, &(), String::new)?;
    args.json = format == formats::Format::Json;
    let path = probe::cache_path();
    let cached = if args.force {
        None
    } else {
        probe::load_cached_from(&path)?
    };
    let result = match cached {
        Some(r) => {
            if !args.json {
                eprintln!(
                    "tdg: using the probe result cached at {} (--force to measure again)",
                    path.display()
                );
            }
            r
        }
        None => {
            let opts = probe::ProbeOptions {
                cc: args.cc.clone(),
                max_buffer_bytes: args.max_buffer_mib.map(|m| m << 20),
                ..Default::default()
            };
            let r = probe::measure(&opts, &mut |stage| {
                if !args.json {
                    eprintln!("tdg probe: {stage}");
                }
            })?;
            if !args.no_save {
                probe::save_to(&r, &path)?;
                if !args.json {
                    eprintln!("tdg: saved to {}", path.display());
                }
            }
            r
        }
    };
    if let Some(svg) = &args.svg {
        std::fs::write(svg, probe::render::svg(&result))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", svg.display()))?;
    }
    let text = formats::table_or_json("tdg probe", format, &result, || {
        probe::render::table(&result)
    })?;
    formats::write_document(args.out.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
