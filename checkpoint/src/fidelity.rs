//! Why a restored copy runs a short call unlike its application. Beside
//! each timed call's time the host library reports the state the call ran
//! in, on every path alike (plain runs, the captured original, restored
//! copies): what ran since the site's previous call (wall and CPU time,
//! voluntary context switches), the minor faults inside the call, the
//! process's anonymous memory in huge pages, the speed of a fixed chain of
//! dependent adds right after the call, and the empty-region cost
//! subtracted. A sub-microsecond call is as fast as the state it meets, so
//! when an image and its application disagree these say which part of the
//! state differs and by how much (docs/checkpoint.md, "Fidelity of short
//! regions").

use stats::Summary;

/// The state one timed call ran in, from its result line (fields an older
/// host library does not write are None).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallState {
    /// Since the end of the site's previous call, up to this call's start:
    /// wall time and the thread's CPU time (None: no previous call in this
    /// process, e.g. an immediate checkpoint's copy).
    pub gap_wall_ns: Option<u64>,
    pub gap_cpu_ns: Option<u64>,
    /// Voluntary context switches in that interval (sleeps, blocking reads).
    pub gap_voluntary_switches: Option<u64>,
    /// Minor page faults in that interval.
    #[serde(default)]
    pub gap_minor_faults: Option<u64>,
    /// Minor page faults inside the timed call.
    pub minor_faults: Option<u64>,
    /// The process's anonymous memory mapped by huge pages, KiB.
    pub anon_huge_kb: Option<u64>,
    /// A fixed chain of dependent adds timed right after the call: the
    /// core's speed (None without a trustworthy TSC).
    pub speed_ns: Option<u64>,
    /// The empty-region cost subtracted from the call's time (rounded).
    pub overhead_ns: Option<u64>,
    /// The step the TSC advances in as the region reads it: the smallest
    /// difference between two distinct empty-region costs (None: no trusted
    /// TSC, or every cost read the same).
    #[serde(default)]
    pub timer_step_ns: Option<f64>,
}

/// A non-negative integer field (`-1` and absent read as None).
fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key))
        .and_then(|v| v.parse::<i64>().ok())
        .and_then(|v| u64::try_from(v).ok())
}

/// A finite decimal field (absent or unreadable: None).
fn real_field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| v.is_finite())
}

impl CallState {
    /// From a result line (`ns=... cpu_ns=... gap_wall_ns=...`); None when
    /// it carries none of the state (an older host library).
    pub fn parse(line: &str) -> Option<CallState> {
        if !line.contains("gap_wall_ns=") {
            return None;
        }
        Some(CallState {
            gap_wall_ns: field(line, "gap_wall_ns="),
            gap_cpu_ns: field(line, "gap_cpu_ns="),
            gap_voluntary_switches: field(line, "gap_vcsw="),
            gap_minor_faults: field(line, "gap_minflt="),
            minor_faults: field(line, "minflt="),
            anon_huge_kb: field(line, "anon_huge_kb="),
            speed_ns: field(line, "speed_ns="),
            overhead_ns: real_field(line, "overhead_ns=")
                .filter(|v| *v >= 0.0)
                .map(|v| v.round() as u64),
            timer_step_ns: real_field(line, "step_ns=").filter(|v| *v > 0.0),
        })
    }

    /// Time before the call that the thread did not run: asleep or
    /// waiting (wall time beyond CPU time since the previous call).
    pub fn waited_ns(&self) -> Option<u64> {
        Some(self.gap_wall_ns?.saturating_sub(self.gap_cpu_ns?))
    }
}

/// One side's states, summarised (medians; faults: the median too, a
/// single fault is one sample's).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StateSummary {
    pub calls: usize,
    pub waited_ns: Option<f64>,
    pub gap_cpu_ns: Option<f64>,
    pub voluntary_switches: Option<f64>,
    #[serde(default)]
    pub gap_minor_faults: Option<f64>,
    pub minor_faults: Option<f64>,
    pub anon_huge_kb: Option<f64>,
    pub speed_ns: Option<f64>,
    pub overhead_ns: Option<f64>,
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.collect();
    Summary::of(&v).map(|s| s.median)
}

impl StateSummary {
    pub fn of(states: &[CallState]) -> Option<StateSummary> {
        if states.is_empty() {
            return None;
        }
        let m = |f: &dyn Fn(&CallState) -> Option<f64>| median(states.iter().filter_map(f));
        Some(StateSummary {
            calls: states.len(),
            waited_ns: m(&|s| s.waited_ns().map(|n| n as f64)),
            gap_cpu_ns: m(&|s| s.gap_cpu_ns.map(|n| n as f64)),
            voluntary_switches: m(&|s| s.gap_voluntary_switches.map(|n| n as f64)),
            gap_minor_faults: m(&|s| s.gap_minor_faults.map(|n| n as f64)),
            minor_faults: m(&|s| s.minor_faults.map(|n| n as f64)),
            anon_huge_kb: m(&|s| s.anon_huge_kb.map(|n| n as f64)),
            speed_ns: m(&|s| s.speed_ns.map(|n| n as f64)),
            overhead_ns: m(&|s| s.overhead_ns.map(|n| n as f64)),
        })
    }
}

/// A part of the state around the call that differs between the two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// One side slept or waited before the call and the other did not (a
    /// loop paced against its clock, which has moved on in a copy; input
    /// that is not there).
    WaitBeforeCall,
    /// The work between the previous call and this one differs (output the
    /// copy discards: its rewritten files and gone pipes are /dev/null).
    WorkBeforeCall,
    /// Different page sizes: anonymous memory in huge pages.
    PageSizes,
    /// Page faults inside the call on one side only.
    FaultsInCall,
    /// The core ran a fixed chain of adds at another speed (its clock).
    CoreSpeed,
    /// A different empty-region cost was subtracted.
    TimerOverhead,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::WaitBeforeCall => "waiting before the call",
            Effect::WorkBeforeCall => "work between the calls",
            Effect::PageSizes => "page sizes",
            Effect::FaultsInCall => "page faults in the call",
            Effect::CoreSpeed => "core speed",
            Effect::TimerOverhead => "timer overhead",
        }
    }
}

/// One difference, with both sides' figures and a sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    pub effect: Effect,
    pub app: f64,
    pub image: f64,
    pub text: String,
}

/// The two sides' states and what differs between them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Fidelity {
    pub app: StateSummary,
    pub image: StateSummary,
    pub findings: Vec<Finding>,
}

/// Waits shorter than this on both sides are the clock reads' own noise.
const WAIT_FLOOR_NS: f64 = 20_000.0;
/// Work between the calls differs when the CPU times differ by this factor
/// and by at least `WORK_FLOOR_NS` (the state's own clock reads cost a few
/// microseconds on these VMs, on both sides alike).
const WORK_FACTOR: f64 = 1.3;
const WORK_FLOOR_NS: f64 = 2_000.0;
/// One 2 MiB page.
const HUGE_PAGE_KB: f64 = 2048.0;
/// The speed probe's medians apart by more than this fraction.
const SPEED_FRACTION: f64 = 0.10;
/// Empty-region costs apart by more than two TSC steps of these VMs.
const OVERHEAD_NS: f64 = 20.0;

fn us(ns: f64) -> String {
    stats::ns(ns)
}

/// What differs between the application's calls and the image's samples.
/// `discarded`: files the copies write elsewhere than beside the
/// application's (validate::discarded_outputs), for the sentence on work
/// between the calls.
pub fn compare(app: &[CallState], image: &[CallState], discarded: &[String]) -> Option<Fidelity> {
    let a = StateSummary::of(app)?;
    let i = StateSummary::of(image)?;
    let findings = [
        wait_before_call(&a, &i),
        work_before_call(&a, &i, discarded),
        page_sizes(&a, &i),
        faults_in_call(&a, &i),
        core_speed(&a, &i),
        timer_overhead(&a, &i),
    ]
    .into_iter()
    .flatten()
    .collect();
    Some(Fidelity {
        app: a,
        image: i,
        findings,
    })
}

fn wait_before_call(a: &StateSummary, i: &StateSummary) -> Option<Finding> {
    let (wa, wi) = (a.waited_ns?, i.waited_ns?);
    let (hi, lo) = (wa.max(wi), wa.min(wi).max(WAIT_FLOOR_NS / 2.0));
    if !(hi > WAIT_FLOOR_NS && hi > 2.0 * lo) {
        return None;
    }
    let (who, other) = if wa > wi {
        ("the application", "the copy")
    } else {
        ("the copy", "the application")
    };
    Some(Finding {
        effect: Effect::WaitBeforeCall,
        app: wa,
        image: wi,
        text: format!(
            "{who} waited {} before the call (asleep or blocked; {} voluntary switch(es)), {other} {}: \
             a call after a wait meets caches, TLB and predictors that other work has cooled; \
             a loop paced against CLOCK_MONOTONIC or CLOCK_REALTIME finds its deadlines past in a \
             copy, whose clocks moved on since the capture",
            us(hi),
            if wa > wi { a.voluntary_switches } else { i.voluntary_switches }
                .map_or("?".into(), |v| format!("{v:.0}")),
            us(wa.min(wi))
        ),
    })
}

fn work_before_call(a: &StateSummary, i: &StateSummary, discarded: &[String]) -> Option<Finding> {
    let (ca, ci) = (a.gap_cpu_ns?, i.gap_cpu_ns?);
    let (hi, lo) = (ca.max(ci), ca.min(ci));
    if !(hi - lo > WORK_FLOOR_NS && hi > WORK_FACTOR * lo) {
        return None;
    }
    let why = if ca > ci && !discarded.is_empty() {
        format!(
            " (the copy writes {} in tdg's work directory, on another file system than the application's)",
            discarded.join(", ")
        )
    } else {
        String::new()
    };
    Some(Finding {
        effect: Effect::WorkBeforeCall,
        app: ca,
        image: ci,
        text: format!(
            "between the previous call and this one the application ran {} of CPU time, the copy {}{why}",
            us(ca),
            us(ci)
        ),
    })
}

fn page_sizes(a: &StateSummary, i: &StateSummary) -> Option<Finding> {
    let (ha, hi) = (a.anon_huge_kb?, i.anon_huge_kb?);
    ((ha - hi).abs() >= HUGE_PAGE_KB).then(|| Finding {
        effect: Effect::PageSizes,
        app: ha,
        image: hi,
        text: format!(
            "the application had {} of anonymous memory in huge pages, the copy {}: \
             TLB reach differs (transparent huge pages: /sys/kernel/mm/transparent_hugepage/enabled)",
            stats::bytes((ha * 1024.0) as u64),
            stats::bytes((hi * 1024.0) as u64)
        ),
    })
}

fn faults_in_call(a: &StateSummary, i: &StateSummary) -> Option<Finding> {
    let (fa, fi) = (a.minor_faults?, i.minor_faults?);
    ((fa - fi).abs() >= 1.0).then(|| Finding {
        effect: Effect::FaultsInCall,
        app: fa,
        image: fi,
        text: format!(
            "the call took {fa:.0} minor page fault(s) in the application and {fi:.0} in the copy (median): \
             each costs microseconds"
        ),
    })
}

fn core_speed(a: &StateSummary, i: &StateSummary) -> Option<Finding> {
    let (sa, si) = (a.speed_ns?, i.speed_ns?);
    (sa > 0.0 && (si / sa - 1.0).abs() > SPEED_FRACTION).then(|| Finding {
        effect: Effect::CoreSpeed,
        app: sa,
        image: si,
        text: format!(
            "a fixed chain of dependent adds after the call took {} in the application and {} in the copy: \
             the core ran at another speed ({:.2}x)",
            us(sa),
            us(si),
            si / sa
        ),
    })
}

fn timer_overhead(a: &StateSummary, i: &StateSummary) -> Option<Finding> {
    let (oa, oi) = (a.overhead_ns?, i.overhead_ns?);
    ((oa - oi).abs() > OVERHEAD_NS).then(|| Finding {
        effect: Effect::TimerOverhead,
        app: oa,
        image: oi,
        text: format!(
            "the empty-region cost subtracted was {} in the application and {} in the copy",
            us(oa),
            us(oi)
        ),
    })
}

/// One line of the state table: its name, both sides' figures and how they
/// are written.
type TableRow<'a> = (&'a str, Option<f64>, Option<f64>, &'a dyn Fn(f64) -> String);

impl Fidelity {
    /// The state table, both sides.
    pub fn render_table(&self) -> String {
        let f = |v: Option<f64>, fmt: &dyn Fn(f64) -> String| v.map_or("-".to_string(), fmt);
        let ns = |v: f64| stats::ns(v);
        let count = |v: f64| format!("{v:.0}");
        let kib = |v: f64| stats::bytes((v * 1024.0) as u64);
        let rows: [TableRow; 8] = [
            (
                "waited before the call",
                self.app.waited_ns,
                self.image.waited_ns,
                &ns,
            ),
            (
                "CPU time since the previous call",
                self.app.gap_cpu_ns,
                self.image.gap_cpu_ns,
                &ns,
            ),
            (
                "voluntary switches since it",
                self.app.voluntary_switches,
                self.image.voluntary_switches,
                &count,
            ),
            (
                "page faults since it",
                self.app.gap_minor_faults,
                self.image.gap_minor_faults,
                &count,
            ),
            (
                "page faults in the call",
                self.app.minor_faults,
                self.image.minor_faults,
                &count,
            ),
            (
                "anonymous memory in huge pages",
                self.app.anon_huge_kb,
                self.image.anon_huge_kb,
                &kib,
            ),
            (
                "speed probe after the call",
                self.app.speed_ns,
                self.image.speed_ns,
                &ns,
            ),
            (
                "timer overhead subtracted",
                self.app.overhead_ns,
                self.image.overhead_ns,
                &ns,
            ),
        ];
        let mut t = String::from("state around the call (medians)       in-app        image\n");
        for (name, a, i, fmt) in rows {
            t += &format!("  {name:<34}  {:>10}  {:>11}\n", f(a, fmt), f(i, fmt));
        }
        t
    }

    /// The findings as lines, or the sentence for none.
    pub fn render_causes(&self) -> String {
        if self.findings.is_empty() {
            return "cause   the measured state around the call is the same on both sides; what differs is \
                    what they do not measure: the cache, TLB and branch-predictor state the replayed calls \
                    leave (a longer delay replays more of the application's own work: \
                    --auto-delay --reference app)\n"
                .to_string();
        }
        self.findings
            .iter()
            .map(|f| format!("cause   {}: {}\n", f.effect.name(), f.text))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(wall: u64, cpu: u64, huge: u64) -> CallState {
        CallState::parse(&format!(
            "ns=300 cpu_ns=1400 overhead_ns=20.0 minflt=0 gap_wall_ns={wall} gap_cpu_ns={cpu} gap_vcsw=0 \
             gap_ivcsw=0 anon_huge_kb={huge} speed_ns=570"
        ))
        .unwrap()
    }

    #[test]
    fn a_result_line_gives_the_state_and_unknowns_read_as_none() {
        let s = CallState::parse(
            "ns=310 cpu_ns=1392 overhead_ns=20.0 minflt=0 gap_wall_ns=181120 gap_cpu_ns=20691 gap_vcsw=1 \
             gap_ivcsw=0 anon_huge_kb=4096 speed_ns=561 step_ns=9.62",
        )
        .unwrap();
        assert_eq!(s.timer_step_ns, Some(9.62));
        assert_eq!(s.waited_ns(), Some(160_429));
        assert_eq!(s.gap_voluntary_switches, Some(1));
        assert_eq!(s.anon_huge_kb, Some(4096));
        assert_eq!(s.overhead_ns, Some(20));
        let cold = CallState::parse(
            "ns=310 cpu_ns=1 overhead_ns=-1.0 minflt=0 gap_wall_ns=-1 gap_cpu_ns=-1 gap_vcsw=-1 \
             gap_ivcsw=-1 anon_huge_kb=-1 speed_ns=-1 step_ns=-1.00",
        )
        .unwrap();
        assert_eq!(cold.waited_ns(), None);
        assert_eq!((cold.speed_ns, cold.overhead_ns), (None, None));
        assert_eq!(cold.timer_step_ns, None);
        assert!(CallState::parse("ns=310 cpu_ns=1392 overhead_ns=20.0 minflt=0").is_none());
    }

    #[test]
    fn each_difference_is_named_and_equal_states_name_none() {
        let same = [state(5_000, 5_500, 0), state(6_000, 6_100, 0)];
        let f = compare(&same, &same, &[]).unwrap();
        assert!(f.findings.is_empty());
        assert!(f.render_causes().contains("--auto-delay --reference app"));
        // The application sleeps ~160 us before each call, the copy not.
        let paced = [state(181_000, 20_000, 0), state(183_000, 21_000, 0)];
        let f = compare(&paced, &same, &[]).unwrap();
        assert_eq!(f.findings[0].effect, Effect::WaitBeforeCall);
        assert!(f.render_causes().contains("the application waited"));
        // It writes where the copy writes elsewhere.
        let writes = [state(8_000, 9_000, 0), state(8_500, 9_500, 0)];
        let f = compare(&writes, &same, &["out.txt".into()]).unwrap();
        assert_eq!(f.findings.len(), 1, "{f:?}");
        assert_eq!(f.findings[0].effect, Effect::WorkBeforeCall);
        assert!(f.findings[0].text.contains("out.txt"));
        // Huge pages on one side only.
        let huge = [state(5_000, 5_500, 8192), state(6_000, 6_100, 8192)];
        let f = compare(&huge, &same, &[]).unwrap();
        assert_eq!(f.findings[0].effect, Effect::PageSizes);
        assert!(f.render_table().contains("8.0 MiB"), "{}", f.render_table());
    }
}
