//! `tdg probe`: measure this machine's effective caches, TLB and timers.
use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use formats::contract::EXIT_CHECK_SAID_NO;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(next_help_heading = "Probe")]
pub struct Args {
    #[command(flatten)]
    output: TableOrJsonOutput,
    /// Also write the latency-vs-buffer-size plot here (SVG).
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Measure again even when a cached result exists.
    #[arg(long)]
    force: bool,
    /// Measure, but do not write the cache.
    #[arg(long)]
    no_save: bool,
    /// Say whether the cached result still holds on this machine now: a
    /// quick re-measure of its key points and a comparison with sysfs.
    /// Exit status 0: it holds; 8: it does not, or there is no cached result.
    #[arg(long, conflicts_with_all = ["force", "no_save", "svg"])]
    check: bool,
    /// C compiler for the micro-benchmarks.
    #[arg(long, env = "CC")]
    cc: Option<String>,
    /// Largest buffer of the cache sweep, in MiB (default: 2x the documented LLC).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=65536))]
    max_buffer_mib: Option<u64>,
}

pub fn run(args: Args) -> CmdResult {
    // JSON keeps stderr quiet.
    let json = args.output.is_json();
    let path = probe::cache_path();
    if args.check {
        return check(&args, &path);
    }
    let previous = probe::load_cached_from(&path)?;
    let cached = if args.force { None } else { previous.clone() };
    let result = match cached {
        Some(r) => {
            if !json {
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
            let mut progress = |stage: &str| {
                if !json {
                    eprintln!("tdg probe: {stage}");
                }
            };
            if args.no_save {
                probe::measure(&opts, &mut progress)?
            } else {
                let settled = probe::measure_settled(&path, &opts, previous, &mut progress)?;
                // Said even with --json: the result printed is not a fresh
                // trusted probe.
                if let Some(note) = &settled.note {
                    eprintln!("tdg probe: {note}");
                }
                if settled.cache_it && !json {
                    eprintln!("tdg: saved to {}", path.display());
                }
                settled.result
            }
        }
    };
    if let Some(svg) = &args.svg {
        fsguard::write_atomic(svg, report::probe_section::latency_svg(&result)?.as_bytes())?;
    }
    let text = if json {
        // The record keeps its own version (the cache's) under "probe".
        formats::json_document("probe", &result)?
    } else {
        probe::render::table(&result)
    };
    args.output.write(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `tdg probe --check`: one line, and the exit status says it.
fn check(args: &Args, path: &std::path::Path) -> CmdResult {
    let Some(cached) = probe::load_cached_from(path)? else {
        let why = format!(
            "no probe result for this machine at {} (none yet, or from another CPU or tdg version); run `tdg probe`",
            path.display()
        );
        eprintln!("tdg probe --check: {why}");
        if args.output.is_json() {
            let doc = serde_json::json!({
                "holds": false,
                "cached": false,
                "reasons": [why],
                "cache": path.display().to_string(),
            });
            args.output.write(&formats::json_document("check", &doc)?)?;
        }
        return Ok(ExitCode::from(EXIT_CHECK_SAID_NO));
    };
    let opts = probe::ProbeOptions {
        cc: args.cc.clone(),
        ..Default::default()
    };
    let sizes = probe::sanity::check_sizes(&cached);
    let benches = probe::Benches::build(&opts)?;
    let (now, reasons) = probe::sanity::recheck(&cached, || {
        probe::remeasure_with(&benches, &opts, &cached, &sizes)
    })?;
    let age = probe::sanity::age_text(cached.measured_at_unix, probe::sanity::now_unix());
    let holds = reasons.is_empty();
    let text = if args.output.is_json() {
        let doc = serde_json::json!({
            "holds": holds,
            "cached": true,
            "reasons": reasons,
            "cache": path.display().to_string(),
            "measured_at_unix": cached.measured_at_unix,
            "load_average_then": cached.load_average,
            "load_average_now": probe::sanity::load_average_now(),
            "remeasured": now.cache.iter().map(|(x, ns)| serde_json::json!({"bytes": x, "ns": ns})).collect::<Vec<_>>(),
            "remeasured_cpu": now.cpu.as_ref().map(|c| serde_json::json!({
                "latency_cycles": c.latency_cycles.iter().map(|(op, cycles)| serde_json::json!({"op": op.name(), "cycles": cycles})).collect::<Vec<_>>(),
                "l1d_ways": c.l1d_ways,
                "l2_ways": c.l2_ways,
            })),
        });
        formats::json_document("check", &doc)?
    } else if holds {
        // A result off sysfs below L1 holds as the machine's own reading
        // (cached so with a note): said as such, not as plausible.
        let sizes = if probe::sanity::against_sysfs(&cached).is_empty() {
            "cache sizes plausible against sysfs"
        } else {
            "cache sizes off sysfs below L1 as when cached (the machine's own reading)"
        };
        format!(
            "tdg probe --check: the cached result holds ({} points re-measured within {}x, {sizes}{}; measured {age})\n",
            now.cache.len(),
            probe::sanity::LATENCY_TOLERANCE,
            if now.cpu.is_some() {
                ", FP latencies and L1d/L2 ways re-measured alike"
            } else {
                ""
            }
        )
    } else {
        format!(
            "tdg probe --check: the cached result (measured {age}) does not hold on this machine now: {}; run `tdg probe --force` when the machine is idle\n",
            reasons.join("; ")
        )
    };
    args.output.write(&text)?;
    Ok(if holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CHECK_SAID_NO)
    })
}
