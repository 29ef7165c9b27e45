//! What `tdg autotune` prints for people at the end: the verdict with the
//! measured speedup beside the predicted one and the Amdahl bound, then
//! each context with what it runs.

use crate::record::{Outcome, Record};
use crate::targets::Target;
use std::fmt::Write;

pub fn render(r: &Record) -> String {
    let mut s = String::new();
    let measured = r
        .proof
        .speedup
        .map_or("undecided".to_string(), |sp| sp.text());
    let _ = writeln!(
        s,
        "{}: {} {}",
        r.routine,
        crate::program::command_line(&r.program.iter().map(Into::into).collect::<Vec<_>>()),
        match r.outcome {
            Outcome::Faster => "is faster with the tuned routine",
            Outcome::NotFaster => "is not measurably faster with the tuned routine",
        }
    );
    let _ = writeln!(
        s,
        "measured     {measured} over {} interleaved rounds ({})",
        r.proof.rounds.len(),
        r.proof.verdict.words()
    );
    let _ = writeln!(
        s,
        "predicted    {:.3}x ({:.3} s against {:.3} s plain); Amdahl bound {:.2}x ({:.1}% of the run in {})",
        r.prediction.speedup,
        r.prediction.program_s,
        r.profile.plain_median_s,
        r.profile.amdahl_bound,
        r.profile.share * 100.0,
        r.routine
    );
    for c in &r.choices {
        let t = r.contexts.iter().find(|t| t.rank == c.rank);
        let target = t
            .and_then(|t| t.target.as_ref())
            .map_or("-".into(), Target::described);
        let _ = writeln!(
            s,
            "context      {}: {} {}, {} -> {} per call (on a {target})",
            c.label,
            c.config,
            if c.specialised {
                "(its own)"
            } else {
                "(shared)"
            },
            stats::ns(c.original_ns),
            stats::ns(c.chosen_ns)
        );
    }
    for t in r.contexts.iter().filter(|t| t.target.is_none()) {
        let _ = writeln!(s, "left out     {}: {}", t.label, t.rejected.join("; "));
    }
    let _ = writeln!(
        s,
        "deployed     {} (`tdg autotune exec {} -- ...`, or LD_PRELOAD; {}/README.md)",
        r.deployment.preload_library.display(),
        r.deployment.dir.display(),
        r.deployment.dir.display()
    );
    s
}
