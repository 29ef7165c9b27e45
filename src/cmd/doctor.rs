//! `tdg doctor`: whether this machine can checkpoint, time and profile, and
//! what the cached machine probe (which feeds every timing default) says.
use super::CmdResult;
use crate::args::output::TableOrJsonOutput;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    output: TableOrJsonOutput,
}

/// Exit status 0 when this machine can checkpoint, else the contract's
/// "machine not ready" (7).
pub fn run(args: Args) -> CmdResult {
    let report = checkpoint::run_doctor();
    let probe = probe_status();
    let mut v = serde_json::to_value(&report)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("probe".into(), probe.json);
    }
    args.output
        .write_report(&v, || format!("{}{}\n", report.render_text(), probe.text))?;
    Ok(if report.can_checkpoint {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(formats::Failure::Environment.exit_code())
    })
}

struct ProbeStatus {
    text: String,
    json: serde_json::Value,
}

/// The cached probe's age, the load it was measured under and whether its
/// cache sizes are plausible against sysfs; nothing is measured here
/// (`tdg probe --check` re-measures).
fn probe_status() -> ProbeStatus {
    let path = probe::cache_path();
    let load_now = probe::sanity::load_average_now();
    let cached = match probe::load_cached_from(&path) {
        Ok(Some(r)) => r,
        Ok(None) => {
            return ProbeStatus {
                text: format!(
                "probe: no result for this machine at {} (`tdg probe` measures it, under a minute)",
                path.display()
            ),
                json: serde_json::json!({ "cache": path.display().to_string(), "cached": false }),
            }
        }
        Err(e) => {
            return ProbeStatus {
                text: format!("probe: {e}"),
                json: serde_json::json!({ "cache": path.display().to_string(), "cached": false, "error": e.to_string() }),
            }
        }
    };
    let now = probe::sanity::now_unix();
    let age = probe::sanity::age_text(cached.measured_at_unix, now);
    let load = |l: Option<f64>| l.map_or("unknown".to_string(), |l| format!("{l:.2}"));
    let sizes: Vec<String> = cached
        .caches
        .iter()
        .map(|c| format!("L{} {}", c.level, stats::bytes(c.effective_bytes)))
        .collect();
    let mut implausible = probe::sanity::against_sysfs(&cached);
    implausible.extend(probe::sanity::cpu_against_documented(&cached));
    let verdict = if implausible.is_empty() {
        "cache sizes plausible against sysfs".to_string()
    } else {
        format!(
            "NOT plausible against what the machine documents: {}; `tdg probe --check` re-measures, `tdg probe --force` when idle replaces it",
            implausible.join("; ")
        )
    };
    let busy = if cached.was_busy() {
        " (busy: other work shared the caches)"
    } else {
        ""
    };
    let cpu = cached
        .cpu
        .as_ref()
        .map(|c| format!("\nprobe CPU: {}", probe::render_cpu::cpu_summary(c)))
        .unwrap_or_default();
    ProbeStatus {
        text: format!(
            "probe: {} measured {age}, load average {} on {} CPUs then{busy}, {} now; {}; {verdict}{cpu}",
            path.display(),
            load(cached.load_average),
            cached.cpus,
            load(load_now),
            sizes.join(", ")
        ),
        json: serde_json::json!({
            "cache": path.display().to_string(),
            "cached": true,
            "measured_at_unix": cached.measured_at_unix,
            "age_s": now.saturating_sub(cached.measured_at_unix),
            "load_average_then": cached.load_average,
            "load_average_now": load_now,
            "cpus": cached.cpus,
            "plausible": implausible.is_empty(),
            "implausible": implausible,
            "cpu": cached.cpu,
        }),
    }
}
