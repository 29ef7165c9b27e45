//! `tdg tune SPEC --impl kernel.c --param NB=16:256:8 ...`: search the
//! kernel's compile-time parameters with the generated driver as objective,
//! or, for a spec with a `checkpoint` clause, with the kernel run as a
//! candidate in restored copies of the application's image.
use super::run::TimingArgs;
use super::CmdResult;
use anyhow::Context;
use driver_gen::RunOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The routine's spec file.
    pub spec: PathBuf,
    /// C file implementing the routine, parameterised by macros.
    #[arg(long = "impl", value_name = "FILE")]
    pub implementation: PathBuf,
    /// A macro to tune: NAME=LO:HI[:STEP] or NAME=V1,V2,... (repeatable).
    #[arg(long = "param", value_name = "NAME=RANGE", required = true)]
    pub params: Vec<String>,
    /// Most configurations to build and time (default: all of a small
    /// space, else 60).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub budget: Option<u64>,
    /// Time every configuration instead of searching (the reference for
    /// judging the search).
    #[arg(long)]
    pub exhaustive: bool,
    /// Start value for a parameter instead of the model's (repeatable).
    #[arg(long = "start", value_name = "NAME=VALUE")]
    pub start: Vec<String>,
    /// Start mid-range instead of from the probe-based model (no probe run).
    #[arg(long)]
    pub no_model: bool,
    /// JSON-lines log of every evaluation (default: <spec name>.tune.jsonl).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// C compiler (default: $CC, cc, gcc, clang).
    #[arg(long)]
    pub cc: Option<String>,
    /// Flags for the implementation.
    #[arg(long, allow_hyphen_values = true, default_value = "-O2")]
    pub cflags: String,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Stop a driver run (or one restore) after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Ignore the spec's `checkpoint` clause and tune with a generated driver.
    #[arg(long)]
    pub default_driver: bool,
    /// More C files for the candidate (checkpoint tuning).
    #[arg(long = "extra", value_name = "FILE")]
    pub extra: Vec<PathBuf>,
    /// Skip verifying each configuration against the application's code on
    /// the image (checkpoint tuning).
    #[arg(long)]
    pub no_verify: bool,
    /// Relative tolerance for floating-point outputs (checkpoint tuning).
    #[arg(long, default_value_t = super::checkpoint::DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Restored copies per configuration when --samples is not given: each is
/// one call on the application's data, so a median of 7 is steady.
const CHECKPOINT_SAMPLES: u32 = 7;

pub fn run(args: Args) -> CmdResult {
    let params = args
        .params
        .iter()
        .map(|p| tune::parse_param(p))
        .collect::<Result<Vec<_>, _>>()?;
    let space = tune::Space::new(params)?;
    let fixed: Vec<(String, i64)> = args
        .start
        .iter()
        .map(|s| {
            let (n, v) = s
                .split_once('=')
                .with_context(|| format!("--start {s}: expected NAME=VALUE"))?;
            let v: i64 = v
                .trim()
                .parse()
                .with_context(|| format!("--start {s}: `{v}` is not an integer"))?;
            if space.index_of(n.trim()).is_none() {
                anyhow::bail!("--start {s}: `{n}` is not one of the --param names");
            }
            Ok((n.trim().to_string(), v))
        })
        .collect::<anyhow::Result<_>>()?;
    let spec = spec_lang::load(&args.spec)?;
    if !args.implementation.is_file() {
        anyhow::bail!(
            "--impl {}: no such file; pass the C file that implements the routine",
            args.implementation.display()
        );
    }
    let mut base = RunOptions {
        cc: args.cc.clone(),
        cflags: args.cflags.split_whitespace().map(String::from).collect(),
        timeout: Duration::from_secs(args.timeout),
        ..RunOptions::default()
    };
    args.timing.apply(&mut base)?;

    let size = space.size();
    let budget = match args.budget {
        Some(b) => b as usize,
        None if args.exhaustive || size <= 60 => usize::try_from(size).unwrap_or(usize::MAX),
        None => 60,
    };
    let starts = if args.exhaustive {
        Vec::new()
    } else if args.no_model {
        let mid: Vec<i64> = space
            .params
            .iter()
            .map(|p| p.values[p.values.len() / 2])
            .collect();
        let mut wanted = mid;
        for (n, v) in &fixed {
            wanted[space.index_of(n).expect("checked")] = *v;
        }
        let point = space.nearest(&wanted);
        vec![tune::Start {
            reason: format!("{} (mid-range, --no-model)", space.describe(&point)),
            point,
        }]
    } else {
        let probed = probe::cached_or_measure()
            .context("the starting-point model needs `tdg probe` (or pass --no-model)")?;
        let cc = toolchain::CCompiler::find(args.cc.as_deref())?;
        let m = tune::MachineModel::from_probe(
            &probed,
            tune::element_bytes(&spec),
            tune::model::fp_registers(&cc.program, &base.cflags),
        );
        if !args.json {
            eprintln!(
                "tdg tune: model from the probe cached at {} (effective caches {})",
                probe::cache_path().display(),
                probed
                    .caches
                    .iter()
                    .map(|c| format!("L{} {}", c.level, probe::render::bytes(c.effective_bytes)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        tune::starts(&space, &m, &fixed)
    };

    let log_path = args.log.clone().unwrap_or_else(|| {
        let stem = args
            .spec
            .file_stem()
            .map_or("tune".into(), |s| s.to_string_lossy().to_string());
        PathBuf::from(format!("{stem}.tune.jsonl"))
    });
    let log_file = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create the log {}", log_path.display()))?;
    let log: Box<dyn Write> = Box::new(std::io::BufWriter::new(log_file));

    if !args.json {
        eprintln!("tdg tune: {space}: {size} configurations, budget {budget}");
        for s in &starts {
            eprintln!("tdg tune: start {}", s.reason);
        }
    }
    let mut driver_objective;
    let mut checkpoint_objective;
    let objective: &mut dyn tune::Objective = match (&spec.checkpoint, args.default_driver) {
        (Some(clause), false) => {
            let image = checkpoint::clause_image(clause, super::run::spec_dir(&args.spec))?;
            let timer = checkpoint::ImageTimer::open(
                &image,
                &checkpoint::TimeOptions {
                    timeout: Duration::from_secs(args.timeout),
                    ..Default::default()
                },
            )?;
            if !args.json {
                eprintln!(
                    "tdg tune: every configuration runs in restored copies of {} (--default-driver for random data instead)",
                    image.display()
                );
            }
            checkpoint_objective = tune::CheckpointObjective::new(
                timer,
                checkpoint::CandidateSource {
                    implementation: args.implementation.clone(),
                    extra: args.extra.clone(),
                    cflags: base.cflags.clone(),
                    defines: base.defines.clone(),
                    cc: args.cc.clone(),
                },
                base.samples.unwrap_or(CHECKPOINT_SAMPLES) as usize,
                !args.no_verify,
                args.tolerance,
            )?;
            &mut checkpoint_objective
        }
        _ => {
            driver_objective = tune::DriverObjective {
                spec: &spec,
                impl_c: args.implementation.clone(),
                base,
            };
            &mut driver_objective
        }
    };
    let mut bar = tune::progress::Bar::new(budget);
    let tuner = tune::Tuner::new(&space, objective, &mut bar, Some(log), budget);
    let outcome = if args.exhaustive {
        tuner.exhaustive()
    } else {
        tuner.search(&starts)
    };
    bar.finish();
    let outcome = outcome?;
    if args.json {
        let mut v = serde_json::to_value(&outcome)?;
        v["log"] = serde_json::Value::from(log_path.display().to_string());
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("best         {}", outcome.best_description);
        print!("time         {:.3} ms per call", outcome.best_ns / 1e6);
        match outcome.best_mflops {
            Some(m) => println!(", {m:.1} MFLOPS"),
            None => println!(),
        }
        println!(
            "evaluations  {} of {} configurations ({} failed) in {:.1} s",
            outcome.evaluations, outcome.space_size, outcome.failed, outcome.seconds
        );
        println!("log          {}", log_path.display());
        let defines: Vec<String> = outcome
            .best_description
            .split(' ')
            .map(|kv| format!("-D{kv}"))
            .collect();
        println!("build with   {}", defines.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}
