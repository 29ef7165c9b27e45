//! Progress on stderr for interactive runs: a bar (hidden when stderr is
//! not a terminal, so logs and CI output stay clean) and the run's notes.

use crate::search::{Evaluation, Progress};
use indicatif::{ProgressBar, ProgressStyle};

pub struct Bar {
    bar: ProgressBar,
    /// Print the run's notes (off when the output is machine-readable:
    /// stderr then carries errors only).
    notes: bool,
}

impl Bar {
    pub fn new(budget: usize, notes: bool) -> Bar {
        let bar = ProgressBar::new(budget as u64);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        Bar { bar, notes }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn evaluated(&mut self, e: &Evaluation, budget: usize, describe: &str) {
        self.bar.set_length(budget as u64);
        self.bar.set_position(e.n as u64);
        let now = e.time_ns.map_or("failed".to_string(), stats::ns);
        let best = e.best_ns.map_or("-".to_string(), stats::ns);
        self.bar
            .set_message(format!("{describe}: {now} (best {best})"));
    }

    fn note(&mut self, line: &str) {
        if self.notes {
            self.bar.suspend(|| eprintln!("tdg tune: {line}"));
        }
    }
}
