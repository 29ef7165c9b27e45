//! `tdg validate`: one context's in-application per-call times beside the
//! driver's warm and flushed timings, and which cache state the application
//! actually runs the routine in (seed 003 section 5.4: a routine whose
//! operands stay cached matches the no-flush timer except for its first
//! calls; one in between calls for a partial flush).

use serde::Serialize;
use stats::Summary;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum CacheState {
    /// The flushed and warm driver timings are within `insensitive_margin`:
    /// the routine does not care, either matches.
    Insensitive,
    Warm,
    Flushed,
    /// Between the two; `position` 0 = warm, 1 = flushed (log scale).
    Partial,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    pub context: String,
    pub early_calls: usize,
    #[serde(serialize_with = "crate::summary_json::write_option")]
    pub in_app_early: Option<Summary>,
    #[serde(serialize_with = "crate::summary_json::write")]
    pub in_app_late: Summary,
    #[serde(serialize_with = "crate::summary_json::write")]
    pub driver_warm: Summary,
    #[serde(serialize_with = "crate::summary_json::write")]
    pub driver_flushed: Summary,
    pub state: CacheState,
    /// Where the in-app late median lies between warm (0) and flushed (1),
    /// on a log scale; may fall outside [0, 1].
    pub position: f64,
}

/// Flushed timings within this factor of warm ones mean the cache state
/// does not change the routine's time.
pub const INSENSITIVE_MARGIN: f64 = 1.10;

/// `in_app` is the context's per-call times in call order; its first
/// `early_calls` are the cold-start group and are judged separately.
/// `warm` and `flushed` are the driver's own statistics of its runs.
pub fn compare(
    context: &str,
    in_app: &[f64],
    early_calls: usize,
    warm: &Summary,
    flushed: &Summary,
) -> Option<Validation> {
    let split = if in_app.len() > early_calls {
        early_calls
    } else {
        0
    };
    let late = Summary::of(&in_app[split..])?;
    let early = Summary::of(&in_app[..split]);
    let (w, f) = (*warm, *flushed);
    let (lw, lf, la) = (
        w.median.max(1e-3).ln(),
        f.median.max(1e-3).ln(),
        late.median.max(1e-3).ln(),
    );
    let position = if (lf - lw).abs() > 1e-12 {
        (la - lw) / (lf - lw)
    } else {
        0.0
    };
    let state = if f.median < w.median * INSENSITIVE_MARGIN {
        CacheState::Insensitive
    } else if position < 0.25 {
        CacheState::Warm
    } else if position > 0.75 {
        CacheState::Flushed
    } else {
        CacheState::Partial
    };
    Some(Validation {
        context: context.to_string(),
        early_calls: split,
        in_app_early: early,
        in_app_late: late,
        driver_warm: w,
        driver_flushed: f,
        state,
        position,
    })
}

pub fn render(v: &Validation) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "context {}", v.context);
    let _ = writeln!(
        o,
        "{:<26} {:>7} {:>10} {:>10} {:>10}",
        "", "calls", "min", "median", "mean"
    );
    let mut row = |name: &str, s: &Summary| {
        let _ = writeln!(
            o,
            "{:<26} {:>7} {:>10} {:>10} {:>10}",
            name,
            s.n,
            stats::ns(s.min),
            stats::ns(s.median),
            stats::ns(s.mean)
        );
    };
    if let Some(e) = &v.in_app_early {
        row(&format!("in-app, first {} calls", v.early_calls), e);
    }
    row("in-app, later calls", &v.in_app_late);
    row("driver, warm (no flush)", &v.driver_warm);
    row("driver, flushed", &v.driver_flushed);
    let verdict = match v.state {
        CacheState::Insensitive => format!(
            "the cache state barely matters here (flushed is within {:.0}% of warm); either driver mode reproduces the application",
            (INSENSITIVE_MARGIN - 1.0) * 100.0
        ),
        CacheState::Warm => "the application runs this routine with WARM caches: time it without flushing".into(),
        CacheState::Flushed => "the application runs this routine with COLD caches: time it with flushing".into(),
        CacheState::Partial => format!(
            "the application runs this routine PARTLY cached ({:.0}% of the way from warm to flushed): try a partial flush (timer flush_size)",
            v.position * 100.0
        ),
    };
    let _ = writeln!(o, "verdict: {verdict}");
    if let Some(e) = &v.in_app_early {
        let _ = writeln!(
            o,
            "first calls: median {} vs later {} (x{:.2}); flushed driver {}",
            stats::ns(e.median),
            stats::ns(v.in_app_late.median),
            e.median / v.in_app_late.median,
            stats::ns(v.driver_flushed.median)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_warm_flushed_partial_and_insensitive() {
        let warm = Summary::of(&[100.0, 101.0, 102.0]).unwrap();
        let flushed = Summary::of(&[1000.0, 1010.0, 990.0]).unwrap();
        let app = |late: f64| {
            let mut v = vec![2000.0, 900.0, 500.0, 300.0];
            v.extend(std::iter::repeat_n(late, 20));
            v
        };
        let v = compare("n=1", &app(105.0), 4, &warm, &flushed).unwrap();
        assert_eq!(v.state, CacheState::Warm);
        assert_eq!(v.in_app_early.unwrap().n, 4);
        assert!(render(&v).contains("WARM"));
        let v = compare("n=1", &app(950.0), 4, &warm, &flushed).unwrap();
        assert_eq!(v.state, CacheState::Flushed);
        let v = compare("n=1", &app(316.0), 4, &warm, &flushed).unwrap();
        assert_eq!(v.state, CacheState::Partial);
        assert!((v.position - 0.5).abs() < 0.01, "{}", v.position);
        let v = compare(
            "n=1",
            &app(316.0),
            4,
            &warm,
            &Summary::of(&[104.0, 105.0]).unwrap(),
        )
        .unwrap();
        assert_eq!(v.state, CacheState::Insensitive);
        assert!(compare("n=1", &[], 4, &warm, &flushed).is_none());
    }
}
