//! Which call contexts to tune: the fewest that together hold the asked-for
//! share of the routine's time in the program, heaviest first. A context's
//! weight is what the program spends in it, calls x in-app time per call;
//! a context the program calls a million times for a microsecond outweighs
//! one it calls once for a hundred.

use instrument::contexts::{ContextEntry, ContextsFile};
use serde::{Deserialize, Serialize};

/// How contexts are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cover {
    /// Share of the routine's in-app time the chosen contexts must hold.
    pub share: f64,
    /// Most contexts chosen, whatever share they reach (each costs a
    /// target and a search).
    pub most: usize,
}

impl Default for Cover {
    fn default() -> Self {
        Cover {
            share: 0.9,
            most: 8,
        }
    }
}

impl Cover {
    pub fn check(&self) -> Result<(), String> {
        if !(self.share > 0.0 && self.share <= 1.0) {
            return Err(format!(
                "--cover {} is not a share of the routine's time: give a fraction in (0, 1], e.g. 0.9",
                self.share
            ));
        }
        if self.most == 0 {
            return Err("--max-contexts counts from 1".into());
        }
        Ok(())
    }
}

/// The chosen contexts (ranks of the contexts file, heaviest first) and
/// the share of the routine's time they hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub ranks: Vec<usize>,
    pub share: f64,
    /// The cover asked for was not reached within `Cover::most` contexts.
    pub short_of_cover: bool,
}

/// What the program spends in a context, in nanoseconds: its calls'
/// time, less the calls the profile judged interrupted (a call descheduled
/// for milliseconds measures the scheduler, not the routine).
pub fn weight(c: &ContextEntry) -> f64 {
    c.in_app_uninterrupted_total_ns
}

/// The heaviest contexts of `file` until their weights reach `cover.share`
/// of the routine's whole in-app time.
pub fn choose(file: &ContextsFile, cover: &Cover) -> Choice {
    let total: f64 = file.contexts.iter().map(weight).sum::<f64>();
    let mut order: Vec<&ContextEntry> = file.contexts.iter().collect();
    order.sort_by(|a, b| weight(b).total_cmp(&weight(a)).then(a.rank.cmp(&b.rank)));
    let mut ranks = Vec::new();
    let mut held = 0.0;
    for c in order {
        if total > 0.0 && held / total >= cover.share {
            break;
        }
        if ranks.len() == cover.most {
            break;
        }
        ranks.push(c.rank);
        held += weight(c);
    }
    let share = if total > 0.0 { held / total } else { 0.0 };
    Choice {
        short_of_cover: share + 1e-12 < cover.share,
        ranks,
        share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ctx(rank: usize, calls: u64, per_call_ns: f64) -> ContextEntry {
        ContextEntry {
            rank,
            values: BTreeMap::from([("n".to_string(), rank as i64)]),
            defines: BTreeMap::new(),
            threads: None,
            calls,
            share: 0.0,
            in_app_total_ns: calls as f64 * per_call_ns,
            in_app_uninterrupted_total_ns: calls as f64 * per_call_ns,
            interrupted_calls: 0,
            in_app_min_ns: per_call_ns,
            in_app_median_ns: per_call_ns,
            in_app_mean_ns: per_call_ns,
            cache: None,
            image: None,
            fidelity: None,
        }
    }

    fn file(contexts: Vec<ContextEntry>) -> ContextsFile {
        ContextsFile {
            format: instrument::contexts::FORMAT_NAME.into(),
            version: instrument::contexts::FORMAT_VERSION,
            routine: "r".into(),
            spec: None,
            calls: contexts.iter().map(|c| c.calls).sum(),
            dropped: 0,
            measured_total_ns: contexts.iter().map(|c| c.in_app_total_ns).sum(),
            contexts,
        }
    }

    #[test]
    fn many_short_calls_outweigh_one_long_call() {
        // rank 1: one call of 100 us; rank 2: 10^6 calls of 1 us.
        let f = file(vec![ctx(1, 1, 100_000.0), ctx(2, 1_000_000, 1_000.0)]);
        let c = choose(&f, &Cover::default());
        assert_eq!(c.ranks, vec![2]);
        assert!(c.share > 0.99 && !c.short_of_cover);
    }

    #[test]
    fn contexts_are_added_until_the_cover_is_reached() {
        let f = file(vec![
            ctx(1, 50, 1000.0),
            ctx(2, 30, 1000.0),
            ctx(3, 15, 1000.0),
            ctx(4, 5, 1000.0),
        ]);
        let c = choose(
            &f,
            &Cover {
                share: 0.9,
                most: 8,
            },
        );
        assert_eq!(c.ranks, vec![1, 2, 3]);
        assert!((c.share - 0.95).abs() < 1e-9);
        let c = choose(
            &f,
            &Cover {
                share: 0.5,
                most: 8,
            },
        );
        assert_eq!(c.ranks, vec![1]);
        let c = choose(
            &f,
            &Cover {
                share: 0.9,
                most: 2,
            },
        );
        assert_eq!(c.ranks, vec![1, 2]);
        assert!(c.short_of_cover);
    }

    #[test]
    fn a_cover_outside_zero_to_one_is_refused() {
        assert!(Cover {
            share: 0.0,
            most: 8
        }
        .check()
        .is_err());
        assert!(Cover {
            share: 1.5,
            most: 8
        }
        .check()
        .is_err());
        assert!(Cover {
            share: 0.9,
            most: 0
        }
        .check()
        .is_err());
        assert!(Cover::default().check().is_ok());
    }
}
