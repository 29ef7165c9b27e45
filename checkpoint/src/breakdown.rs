//! Where a restore's time goes: CRIU's own phases, read from the timestamps
//! of a restore log written at log level 4 (`(SS.uuuuuu) message` lines).

/// One phase of a CRIU restore and its duration in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    pub ms: f64,
}

/// The marks that separate CRIU 4.1's restore phases, in log order, and the
/// name of the phase each one ends.
const MARKS: &[(&str, &str)] = &[
    (
        "Forking task with",
        "read the images, collect files and namespaces",
    ),
    (
        "Switched to the restorer",
        "fork the task, restore files, sessions and resources",
    ),
    ("Preadv ", "map the memory areas"),
    ("- returned ", "read the pages into memory (page restore)"),
    (": Restored", "vDSO, registers, the rest of the restorer"),
    (
        "Restore finished successfully",
        "unlock, step the task to sigreturn, resume",
    ),
];

fn timestamp(line: &str) -> Option<f64> {
    let inner = line.strip_prefix('(')?.split_once(')')?.0;
    inner.trim().parse::<f64>().ok()
}

/// CRIU's restore phases from a level-4 log, in order; empty when a mark is
/// missing (another CRIU version, or a lower log level).
pub fn criu_restore_phases(log: &str) -> Vec<Phase> {
    let mut phases = Vec::new();
    let mut last = 0.0;
    let mut lines = log.lines();
    for (mark, name) in MARKS {
        let Some(at) = lines
            .by_ref()
            .find(|l| l.contains(mark))
            .and_then(timestamp)
        else {
            return Vec::new();
        };
        phases.push(Phase {
            name,
            ms: (at - last) * 1e3,
        });
        last = at;
    }
    phases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_come_from_the_marks_in_log_order() {
        let log = "(00.000000) CRIU run id = x\n\
                   (00.009776) Forking task with 29304 pid (flags 0x0)\n\
                   (00.013030)  29304: Forking task with 29305 pid (flags 0x0)\n\
                   (00.021383) pie: 29304: Switched to the restorer 29304\n\
                   (00.023892) pie: 29304: Preadv 0x55c1349ef000:4096... (15 iovs)\n\
                   (00.071748) pie: 29304: `- returned 17502208\n\
                   (00.071948) pie: 29304: 29304: Restored\n\
                   (00.088930) Restore finished successfully. Tasks resumed.\n";
        let p = criu_restore_phases(log);
        assert_eq!(p.len(), 6);
        assert!((p[0].ms - 9.776).abs() < 1e-6);
        assert!((p[3].ms - 47.856).abs() < 1e-6, "{p:?}");
        let total: f64 = p.iter().map(|x| x.ms).sum();
        assert!((total - 88.930).abs() < 1e-6);
        assert!(criu_restore_phases("(00.1) something else\n").is_empty());
    }
}
