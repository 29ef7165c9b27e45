//! A finished search as people read it: the table `tdg tune` prints.

use crate::run::TuneOutcome;

impl TuneOutcome {
    /// The default output: the best configuration and how it was found.
    pub fn render_text(&self) -> String {
        let outcome = self;
        use std::fmt::Write;
        let o = &outcome.search;
        let mut s = String::new();
        let _ = writeln!(s, "best         {}", o.best_description);
        let _ = match outcome.contexts {
            Some(n) => write!(
                s,
                "time         {} in the routine over the program's {n} context(s)",
                stats::ns(o.best_ns)
            ),
            None => write!(s, "time         {} per call", stats::ns(o.best_ns)),
        };
        if let Some(u) = o.best_uncertainty_pct {
            let _ = write!(s, " (+-{u:.1}%)");
        }
        let _ = match o.best_mflops {
            Some(m) => writeln!(s, ", {m:.1} MFLOPS"),
            None => writeln!(s),
        };
        if !o.tied.is_empty() {
            let names: Vec<String> = o.tied.iter().map(|c| c.to_string()).collect();
            let _ = writeln!(
                s,
                "tied with    {} (not told apart at 95% confidence, noise {:.1}%)",
                names.join("; "),
                o.noise_pct.unwrap_or(0.0)
            );
        }
        let _ = writeln!(
            s,
            "evaluations  {} of {} configurations ({:.1}%, {} failed) in {:.1} s, strategy {}",
            o.evaluations,
            o.space_size,
            100.0 * o.evaluations as f64 / o.space_size.max(1) as f64,
            o.failed,
            o.seconds,
            outcome.strategy.spelling()
        );
        if o.split_evaluations > 0 {
            let t = &o.time_split;
            let per = |x: f64| x / o.split_evaluations as f64;
            let _ = writeln!(
            s,
            "per eval     {:.3} s: build {:.3} s, sampling {:.3} s (flush {:.3} s of it), other {:.3} s",
            per(t.total_s),
            per(t.build_s),
            per(t.sampling_s),
            per(t.flush_s),
            per(t.other_s())
        );
        }
        if let Some(m) = &o.model {
            let _ = writeln!(
                s,
                "model        {} (its choice, 0 evaluations)",
                m.configuration
            );
            let _ = match (m.time_ns, m.best_over_model) {
            (Some(t), Some(r)) if m.moved.is_empty() => writeln!(
                s,
                "             {} per call once timed; the search kept it (best/model {r:.3})",
                stats::ns(t)
            ),
            (Some(t), Some(r)) => writeln!(
                s,
                "             {} per call once timed; the search moved {} ({} value steps; best/model {r:.3})",
                stats::ns(t),
                m.moved
                    .iter()
                    .map(|(n, a, b)| format!("{n} {a}->{b}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                m.steps
            ),
            _ => writeln!(s, "             not timed by this search"),
        };
        }
        let _ = writeln!(s, "log          {}", outcome.log.display());
        if let Some(dir) = &outcome.campaign {
            let _ = writeln!(
                s,
                "campaign     {} (tdg tune --resume continues it)",
                dir.display()
            );
        }
        let build = o.best.build_flags();
        if !build.is_empty() {
            let _ = writeln!(s, "build with   {}", build.join(" "));
        }
        for flag in o.best.run_flags() {
            let _ = writeln!(s, "run with     {flag}");
        }
        s
    }
}
