//! Progress bar on stderr for interactive runs (hidden when stderr is not a
//! terminal, so logs and CI output stay clean).

use crate::search::{Evaluation, Progress};
use indicatif::{ProgressBar, ProgressStyle};

pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    pub fn new(budget: usize) -> Bar {
        let bar = ProgressBar::new(budget as u64);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        Bar { bar }
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
}
