//! `tdg profile [--spec SPEC] -- CMD ARGS...` and `tdg profile report FILE`.
use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use anyhow::Context as _;
use instrument::{format, interpose, report, session};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Call contexts, per-call timeline and early/late split of a profile.
    Report(ReportArgs),
}

#[derive(clap::Args)]
#[command(next_help_heading = "Profiling")]
struct RunArgs {
    /// Spec of the routine to interpose (LD_PRELOAD shim built from its
    /// signature). Without it the program must use the TDG_PROFILE markers.
    #[arg(long, value_name = "SPEC")]
    spec: Option<PathBuf>,
    /// Profile file to write [default: ROUTINE.tdgp, or PROGRAM.tdgp].
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Expected calls per routine; sizes the buffer (TDG_PROFILE_CALLS).
    #[arg(long, value_name = "N")]
    calls: Option<u64>,
    /// Buffer size in records, overriding --calls (TDG_PROFILE_RECORDS).
    #[arg(long, value_name = "N")]
    records: Option<u64>,
    /// Log with ordinary stores instead of non-temporal ones (for comparison).
    #[arg(long)]
    cached_stores: bool,
    /// Include directory for the spec's include= clauses [default: the spec's directory].
    #[arg(short = 'I', value_name = "DIR")]
    include: Vec<PathBuf>,
    /// C compiler for the shim [default: $CC, cc, gcc, clang].
    #[arg(long)]
    cc: Option<String>,
    #[command(flatten)]
    report: TableOrJsonOutput,
    /// The program and its arguments.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
#[command(next_help_heading = "Report")]
struct ReportArgs {
    /// A profile written by `tdg profile`.
    file: PathBuf,
    /// Routine to report on (needed when the profile holds several).
    #[arg(long)]
    routine: Option<String>,
    #[command(flatten)]
    output: TableOrJsonOutput,
    /// Also write an SVG plot of per-call time over call index.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Contexts shown in the table.
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Calls of each context counted as "early" (cold-cache start).
    #[arg(long, default_value_t = 4)]
    early: usize,
    /// Also print every call in order (call index, ns, context rank); with
    /// --json, adds a "timeline" array of [ns, rank].
    #[arg(long)]
    timeline: bool,
}

pub fn run(args: Args) -> CmdResult {
    match args.action {
        Some(Action::Report(r)) => run_report(r),
        None => run_profile(args.run),
    }
}

fn run_profile(a: RunArgs) -> CmdResult {
    if a.command.is_empty() {
        anyhow::bail!(
            "no command to profile: put it after `--`, e.g. `tdg profile --spec crc32.spec -- ./app args` (or `tdg profile report FILE`)"
        );
    }
    let work = toolchain::scratch_dir("tdg-profile").context("creating a scratch directory")?;
    let shim = a
        .spec
        .as_deref()
        .map(|s| build_shim(&a, s, work.path()))
        .transpose()?;
    let out_dir = work.path().join("out");
    std::fs::create_dir_all(&out_dir)?;
    let settings = session::RuntimeSettings {
        calls: a.calls,
        records: a.records,
        cached_stores: a.cached_stores,
    };
    let preload = shim.as_ref().map(|(path, _)| path.as_path());
    let outcome = match session::run_profiled(&a.command, preload, &settings, &out_dir) {
        // The spec names a routine the program does not have: every run
        // would end the same way.
        Err(e @ session::SessionError::Unresolved(_)) => {
            return Err(formats::contract::usage(e.to_string()).into())
        }
        other => other?,
    };
    let output = a.output.clone().unwrap_or_else(|| {
        let name = match &shim {
            Some((_, routine)) => routine.clone(),
            None => PathBuf::from(&a.command[0])
                .file_name()
                .map_or_else(|| "profile".into(), |n| n.to_string_lossy().into_owned()),
        };
        PathBuf::from(format!("{name}.tdgp"))
    });
    format::write(&outcome.profile, &output)?;
    let p = &outcome.profile;
    let routines = recorded(p);
    let program = a.command[0].to_string_lossy();
    for lost in &outcome.lost {
        eprintln!(
            "tdg: warning: {lost}; its calls are missing from {} (free space there and run it again)",
            output.display()
        );
    }
    let table = ended(&outcome, &program, &routines, &output);
    let (code, signal) = (outcome.status.code(), outcome.status.signal());
    if a.report.is_json() || a.report.out.is_some() {
        a.report.write_report(
            &serde_json::json!({
                "program": program,
                "exit_code": code,
                "signal": signal,
                "ended": outcome.how_it_ended(),
                "profile": output.display().to_string(),
                "routines": routines,
                "processes": p.pids.len(),
                "dropped": p.dropped,
                "unresolved": outcome.unresolved,
            }),
            || table.clone(),
        )?;
    } else {
        // The program's own output owns stdout.
        eprint!("{table}");
    }
    // The program's status is in the report above; tdg's own says only
    // that it did not succeed, so it never collides with tdg's statuses.
    Ok(match code {
        Some(0) => ExitCode::SUCCESS,
        _ => ExitCode::from(formats::Failure::Crash.exit_code()),
    })
}

/// The spec's `LD_PRELOAD` shim, built in `work`, and the routine it
/// interposes (the profile's default name).
fn build_shim(a: &RunArgs, spec_path: &Path, work: &Path) -> anyhow::Result<(PathBuf, String)> {
    let spec = spec_lang::load(spec_path, &[])?.for_use(spec_lang::Use::Profile)?;
    let cc = toolchain::CCompiler::find(a.cc.as_deref())?;
    let incs = interpose::include_dirs_for(spec_path, &a.include);
    let cache = toolchain::BuildCache::open_or_warn(&driver_gen::default_build_cache());
    let built = interpose::build_interposers(&cc, &spec, &work.join("shim"), &incs, cache.as_ref())
        .context("building the LD_PRELOAD shim")?;
    Ok((built.preload_shim, spec.routine.name.name.clone()))
}

/// One routine's calls in a profile.
#[derive(serde::Serialize)]
struct RoutineCalls {
    name: String,
    calls: usize,
    dropped: u64,
}

fn recorded(p: &format::Profile) -> Vec<RoutineCalls> {
    p.routines
        .iter()
        .enumerate()
        .map(|(i, r)| RoutineCalls {
            name: r.name.clone(),
            calls: p.records.iter().filter(|x| x.routine as usize == i).count(),
            dropped: r.dropped,
        })
        .collect()
}

/// What the run did and where its profile went, with the warnings that
/// change what the profile can be trusted for and the next command.
fn ended(
    outcome: &session::SessionOutcome,
    program: &str,
    routines: &[RoutineCalls],
    output: &Path,
) -> String {
    let p = &outcome.profile;
    let per_routine: Vec<String> = routines
        .iter()
        .map(|r| format!("{} {} calls ({} dropped)", r.name, r.calls, r.dropped))
        .collect();
    let mut table = format!(
        "tdg: `{program}` {}; recorded {} in {} process(es); wrote {}\n",
        outcome.how_it_ended(),
        per_routine.join(", "),
        p.pids.len(),
        output.display()
    );
    if outcome.unresolved {
        table.push_str(&format!(
            "tdg: {}\n",
            session::unresolved_explanation(program)
        ));
    }
    if p.dropped > 0 {
        table.push_str(&format!(
            "tdg: warning: {} calls were not recorded because the buffer ({} records) was full; rerun with --calls larger\n",
            p.dropped, p.capacity
        ));
    }
    table.push_str(&format!(
        "tdg: next: tdg profile report {}\n",
        output.display()
    ));
    table
}

fn run_report(a: ReportArgs) -> CmdResult {
    let profile = format::read(&a.file)?;
    let rep = report::build(
        &profile,
        &report::ReportOptions {
            routine: a.routine.clone(),
            early_calls: a.early,
        },
    )?;
    let mut value = serde_json::to_value(&rep)?;
    if a.timeline {
        value["timeline"] = serde_json::to_value(&rep.timeline)?;
    }
    a.output.write_report(&value, || {
        let mut s = report::render_table(&rep, a.top);
        if a.timeline {
            s.push_str(&format!("\n{:>8}  {:>12}  context\n", "call", "ns"));
            for (i, (ns, rank)) in rep.timeline.iter().enumerate() {
                s.push_str(&format!("{i:>8}  {ns:>12.1}  {rank}\n"));
            }
        }
        s
    })?;
    if let Some(svg) = &a.svg {
        let plot = ::report::profile_section::timeline_svg(&rep)?;
        fsguard::write_atomic(svg, plot.as_bytes())?;
        eprintln!("tdg: wrote {}", svg.display());
    }
    Ok(ExitCode::SUCCESS)
}
