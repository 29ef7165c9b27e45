//! A finished search as people read it: the table `tdg tune` prints.

use crate::run::TuneOutcome;
use crate::search::{ModelChoice, Outcome};
use std::fmt;

impl TuneOutcome {
    /// The default output: the best configuration and how it was found.
    pub fn render_text(&self) -> String {
        OutcomeText(self).to_string()
    }
}

/// The table of [`TuneOutcome::render_text`], one block a method: the
/// best, the search's effort, the model's choice, where the results are
/// and how to use the best.
struct OutcomeText<'a>(&'a TuneOutcome);

impl fmt::Display for OutcomeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.0.search;
        self.best(f, o)?;
        self.effort(f, o)?;
        if let Some(m) = &o.model {
            model(f, m)?;
        }
        self.results(f, o)
    }
}

impl OutcomeText<'_> {
    /// The best configuration, its time and what it is tied with.
    fn best(&self, f: &mut fmt::Formatter<'_>, o: &Outcome) -> fmt::Result {
        writeln!(f, "best         {}", o.best_description)?;
        match self.0.contexts {
            Some(n) => write!(
                f,
                "time         {} in the routine over the program's {n} context(s)",
                stats::ns(o.best_ns)
            )?,
            None => write!(f, "time         {} per call", stats::ns(o.best_ns))?,
        }
        if let Some(u) = o.best_uncertainty_pct {
            write!(f, " (+-{u:.1}%)")?;
        }
        match o.best_mflops {
            Some(m) => writeln!(f, ", {m:.1} MFLOPS")?,
            None => writeln!(f)?,
        }
        if !o.tied.is_empty() {
            writeln!(
                f,
                "tied with    {} (not told apart at 95% confidence, noise {:.1}%)",
                config::listed(&o.tied),
                o.noise_pct.unwrap_or(0.0)
            )?;
        }
        if !o.finalists.is_empty() {
            writeln!(
                f,
                "finalists    {} (not re-timed side by side: --no-final-retime)",
                config::listed(&o.finalists)
            )?;
        }
        Ok(())
    }

    /// How much of the space was evaluated, and where an evaluation's time
    /// went.
    fn effort(&self, f: &mut fmt::Formatter<'_>, o: &Outcome) -> fmt::Result {
        writeln!(
            f,
            "evaluations  {} of {} configurations ({:.1}%, {} failed) in {:.1} s, strategy {}",
            o.evaluations,
            o.space_size,
            100.0 * o.evaluations as f64 / o.space_size.max(1) as f64,
            o.failed,
            o.seconds,
            self.0.strategy.spelling()
        )?;
        if o.split_evaluations > 0 {
            let t = &o.time_split;
            let per = |x: f64| x / o.split_evaluations as f64;
            writeln!(
                f,
                "per eval     {:.3} s: build {:.3} s, sampling {:.3} s (flush {:.3} s of it), other {:.3} s",
                per(t.total_s),
                per(t.build_s),
                per(t.sampling_s),
                per(t.flush_s),
                per(t.other_s())
            )?;
        }
        Ok(())
    }

    /// The log, the campaign, and the flags that build and run the best.
    fn results(&self, f: &mut fmt::Formatter<'_>, o: &Outcome) -> fmt::Result {
        writeln!(f, "log          {}", self.0.log.display())?;
        if let Some(dir) = &self.0.campaign {
            writeln!(
                f,
                "campaign     {} (tdg tune --resume continues it)",
                dir.display()
            )?;
        }
        let build = o.best.build_flags();
        if !build.is_empty() {
            writeln!(f, "build with   {}", build.join(" "))?;
        }
        for flag in o.best.run_flags() {
            writeln!(f, "run with     {flag}")?;
        }
        Ok(())
    }
}

/// The model's own choice and how the search's best compares.
fn model(f: &mut fmt::Formatter<'_>, m: &ModelChoice) -> fmt::Result {
    writeln!(
        f,
        "model        {} (its choice, 0 evaluations)",
        m.configuration
    )?;
    match (m.time_ns, m.best_over_model) {
        (Some(t), Some(r)) if m.moved.is_empty() => writeln!(
            f,
            "             {} per call once timed; the search kept it (best/model {r:.3})",
            stats::ns(t)
        ),
        (Some(t), Some(r)) => writeln!(
            f,
            "             {} per call once timed; the search moved {} ({} value steps; best/model {r:.3})",
            stats::ns(t),
            m.moved
                .iter()
                .map(|(n, a, b)| format!("{n} {a}->{b}"))
                .collect::<Vec<_>>()
                .join(", "),
            m.steps
        ),
        _ => writeln!(f, "             not timed by this search"),
    }
}
