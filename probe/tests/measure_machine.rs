//! Runs the real probe once on this machine and checks its numbers against
//! what sysfs documents (not against constants), so the test holds on any
//! x86-64 Linux machine with sysfs cache descriptions.

use probe::{Benches, ProbeOptions, ProbeResult, Stage};
use std::sync::OnceLock;

/// The micro-benchmarks, built once for the shared probe and every stage
/// measured again.
fn benches() -> &'static Benches {
    static BENCHES: OnceLock<Benches> = OnceLock::new();
    BENCHES.get_or_init(|| Benches::build(&ProbeOptions::default()).expect("probe builds"))
}

/// Probes run alone on the machine, the shared first one included: two
/// probes on the two vCPUs disturb each other's caches and TLBs (a shared
/// probe made while a re-probing test ran read 256 B lines for 64 B), and
/// so does another test binary's work. `stage`: that stage of `earlier`
/// measured again; `None`: a whole probe.
fn measure_alone(stage: Option<(Stage, &ProbeResult)>) -> ProbeResult {
    let _alone = testkit::exclusive();
    let opts = ProbeOptions::default();
    match stage {
        Some((stage, earlier)) => probe::remeasure_stage(benches(), &opts, earlier, stage),
        None => probe::measure_with(benches(), &opts, &mut |s| eprintln!("probe: {s}")),
    }
    .expect("probe runs")
}

fn probed() -> &'static ProbeResult {
    static RESULT: OnceLock<ProbeResult> = OnceLock::new();
    RESULT.get_or_init(|| {
        let r = measure_alone(None);
        eprintln!("{}", probe::render::table(&r));
        r
    })
}

/// The least disturbed reading of up to eight measurements (three whole
/// probes): `read` of the shared probe, then of `stage` measured again
/// (`None`: a whole probe) while `fits` says the reading is off, kept by
/// `better`. A stage takes one to eight seconds, a probe fifteen, and a
/// stage can miss a step on a quiet host too (the TLB stage finds the L2
/// TLB's in about half its runs): eight readings of most stages cost less
/// than a probe. Other work on a shared host only ever moves a reading one
/// way (it evicts lines early, adds cycles, shrinks an effective size), so
/// the better of two readings is the less disturbed one, as min-of-N is
/// for times; measuring again only while off keeps a quiet run at one
/// probe, and only the stage off keeps a disturbed one at seconds. Returns
/// the kept reading and each measurement's own, for the message.
fn least_disturbed<T: Clone + std::fmt::Debug>(
    stage: Option<Stage>,
    read: impl Fn(&ProbeResult) -> T,
    fits: impl Fn(&T) -> bool,
    better: impl Fn(T, T) -> T,
) -> (T, Vec<T>) {
    let mut best = read(probed());
    let mut seen = vec![best.clone()];
    let measurements = if stage.is_some() { 8 } else { 3 };
    while !fits(&best) && seen.len() < measurements {
        eprintln!("measuring {stage:?} again: a reading is off what is documented: {best:?}");
        let again = read(&measure_alone(stage.map(|s| (s, probed()))));
        seen.push(again.clone());
        best = better(best, again);
    }
    (best, seen)
}

fn within(measured: u64, documented: u64, frac: f64) -> bool {
    (measured as f64 - documented as f64).abs() <= frac * documented as f64
}

#[test]
fn l1d_within_25_and_l2_within_50_percent_of_sysfs() {
    let r = probed();
    let doc: Vec<u64> = probe::documented::data_caches(&r.documented_caches)
        .iter()
        .map(|c| c.size_bytes)
        .collect();
    assert!(
        doc.len() >= 2,
        "sysfs documents no L1d/L2 here: {:?}",
        r.documented_caches
    );
    // L1d within 25%; L2 within 50%: with its SMT sibling another tenant's,
    // an L2 is shared by two, and a host with a 512 KiB L2 read 370-450 KiB
    // effective on some days and 279-330 KiB (-37 to -45%) on others, where
    // a 1 MiB one read -16 to -18%.
    const TOLERANCE: [f64; 2] = [0.25, 0.50];
    let fits = |sizes: &Vec<u64>| {
        sizes.len() >= 2
            && sizes
                .iter()
                .zip(&doc)
                .take(2)
                .zip(TOLERANCE)
                .all(|((&m, &d), t)| within(m, d, t))
    };
    let sizes = |r: &ProbeResult| {
        r.caches
            .iter()
            .map(|c| c.effective_bytes)
            .collect::<Vec<u64>>()
    };
    // Other work (an SMT sibling sharing L2, a neighbour in L3) shrinks
    // the effective sizes, so each level's largest reading counts; but a
    // probe disturbed enough to miss a level's step reads the next level
    // in its place (a slow moment here read L2 at 4 MiB), so a probe whose
    // sizes all fit counts over the others.
    let (best, seen) = least_disturbed(Some(Stage::CacheLevels), sizes, fits, |a, b| {
        if fits(&b) {
            b
        } else {
            a.iter().zip(&b).map(|(&x, &y)| x.max(y)).collect()
        }
    });
    assert!(
        best.len() >= 2,
        "fewer than two levels found: {:?}",
        r.caches
    );
    for (i, ((&m, &d), t)) in best.iter().zip(&doc).zip(TOLERANCE).enumerate() {
        assert!(
            within(m, d, t),
            "L{} effective {m} B vs documented {d} B (each probe's sizes: {seen:?})",
            i + 1
        );
    }
}

#[test]
fn levels_get_slower_outwards_and_memory_is_slowest() {
    // Each level at least 1.3x the one inside it: the probe's loads overlap
    // and its figures are effective latencies, so adjacent levels can read
    // closer than their documented latencies; this is the order, not a
    // latency ratio of dependent loads. A sweep disturbed at one level's
    // sizes blurs two levels into one step: a sweep in order counts over
    // one that is not.
    let ordered = |(caches, memory_ns): &(Vec<probe::CacheLevel>, f64)| {
        caches.windows(2).all(|w| {
            w[1].latency_ns > 1.3 * w[0].latency_ns
                && w[1].effective_bytes >= 2 * w[0].effective_bytes
        }) && caches
            .last()
            .is_some_and(|last| *memory_ns > 1.5 * last.latency_ns)
    };
    let (_, seen) = least_disturbed(
        Some(Stage::CacheLevels),
        |r| (r.caches.clone(), r.memory_latency_ns),
        ordered,
        |a, b| if ordered(&a) { a } else { b },
    );
    assert!(
        seen.iter().any(ordered),
        "no sweep in order (each sweep's levels and memory latency): {seen:?}"
    );
}

#[test]
fn line_size_matches_sysfs() {
    let r = probed();
    assert!(r.line.memory_fetch_bytes >= r.line.bytes);
    let Some(doc) = r.line.documented_bytes else {
        return;
    };
    // A probe whose every pair test was disturbed reads the memory fetch
    // unit (`memory_fetch_bytes`) as the line: a reading of the line that
    // matches counts over one that does not.
    let matches = |l: &probe::LineSize| l.bytes == doc;
    let (line, seen) = least_disturbed(
        Some(Stage::LineSize),
        |r| r.line.clone(),
        matches,
        |a, b| if matches(&a) { a } else { b },
    );
    assert_eq!(line.bytes, doc, "{seen:?}");
}

#[test]
fn first_tlb_level_is_smaller_than_the_l1d_footprint_step() {
    let r = probed();
    let first = r.tlb.first().expect("at least one TLB level");
    // Real L1 dTLBs hold 8..256 entries; the data-cache step (L1d / line
    // pages) must have been filtered out, not reported as a TLB.
    assert!((8..=256).contains(&first.entries), "{:?}", r.tlb);
    // Where cpuid documents the TLBs, every documented level has a measured
    // step whose reach is at most a grid step above and not far below (a
    // few entries hold code, stack and page-table pages). Other work only
    // ever evicts entries and adds steps: a probe whose steps fit counts
    // over one whose steps do not. A step no TLB makes (one between the L1
    // and L2 TLBs' counts) carries no documented count.
    let documented_reach_fits = |tlb: &Vec<probe::TlbLevel>| {
        probe::documented::documented_dtlb_entries()
            .iter()
            .flatten()
            .all(|&d| {
                tlb.iter().any(|t| {
                    t.documented_entries == Some(d)
                        && t.entries as f64 <= 1.2 * d as f64
                        && t.entries as f64 >= 0.5 * d as f64
                })
            })
    };
    let (tlb, seen) = least_disturbed(
        Some(Stage::Tlb),
        |r| r.tlb.clone(),
        documented_reach_fits,
        |a, b| if documented_reach_fits(&a) { a } else { b },
    );
    assert!(
        documented_reach_fits(&tlb),
        "no probe within 0.5-1.2x of cpuid's TLB entries: {seen:?}"
    );
    let l1_lines = r.caches[0].effective_bytes / r.line.bytes;
    assert!(
        r.tlb.iter().all(|t| !within(t.entries, l1_lines, 0.1)),
        "{:?}",
        r.tlb
    );
}

#[test]
fn timers_are_characterised() {
    let r = probed();
    let mono = r
        .timers
        .iter()
        .find(|t| t.name == "clock_gettime(MONOTONIC)")
        .unwrap();
    assert!(
        mono.resolution_ns > 0.0 && mono.resolution_ns <= 1000.0,
        "{mono:?}"
    );
    assert!(
        mono.overhead_ns > 1.0 && mono.overhead_ns < 10_000.0,
        "{mono:?}"
    );
    // gettimeofday counts microseconds, so no two readings differ by less.
    let tod = r.timers.iter().find(|t| t.name == "gettimeofday").unwrap();
    assert!(tod.resolution_ns >= 999.0, "{tod:?}");
    let interval = r.recommended_min_interval_s();
    assert!(interval > 1e-6 && interval < 0.1, "{interval}");
}

#[test]
fn tsc_frequency_matches_the_documented_one() {
    let r = probed();
    let Some(tsc) = &r.tsc else { return };
    assert!(tsc.measured_ghz > 0.1 && tsc.measured_ghz < 10.0, "{tsc:?}");
    if let Some(doc) = tsc.documented_ghz {
        assert!((tsc.measured_ghz / doc - 1.0).abs() < 0.01, "{tsc:?}");
    }
}

#[test]
fn probe_finishes_within_a_minute() {
    // Other work only ever adds time (a slow moment of this host made one
    // probe take 73 s): the quickest of up to three probes counts.
    let (quickest, seen) = least_disturbed(None, |r| r.duration_s, |&s| s < 60.0, f64::min);
    assert!(quickest < 60.0, "each probe took (s): {seen:?}");
}

#[test]
fn a_small_flush_leaves_the_operand_cached_and_the_recommended_one_evicts_it() {
    let r = probed();
    let f = r.flush.as_ref().expect("flush probe ran");
    let smallest = f.curve.first().unwrap();
    // Reading only as much as the operand leaves it in the outer caches.
    assert!(smallest.ns < 0.5 * f.cold_ns, "{f:?}");
    let rec = r.recommended_flush_bytes();
    assert!(
        rec > r.caches[1].effective_bytes,
        "a flush must exceed L2: {rec}"
    );
    if f.sufficient_bytes.is_some() {
        let at = f.curve.iter().find(|p| p.x >= rec).unwrap();
        // After the recommended flush the operand comes from memory again.
        assert!(at.ns > 3.0 * f.warm_ns, "{at:?} vs warm {}", f.warm_ns);
    }
}

fn cpu() -> &'static probe::CpuParams {
    probed()
        .cpu
        .as_ref()
        .expect("the CPU side is measured on x86-64")
}

/// Latencies at every width and the register counts within one of the
/// vendor's published figures for the part this runs on (the table holds
/// the AMD EPYC and Intel Xeon kinds this fleet comes in).
#[test]
fn fp_latencies_and_registers_agree_with_the_vendor_table() {
    let c = cpu();
    let Some(uarch) = probe::vendor::lookup(&c.vendor, c.family, c.model) else {
        eprintln!(
            "SKIPPED: {} family {} model {} is not in the vendor table",
            c.vendor, c.family, c.model
        );
        return;
    };
    assert_eq!(c.microarchitecture.as_deref(), Some(uarch.name));
    assert!(!c.fp.is_empty());
    let published = |t: &probe::cpu::FpTiming| f64::from(uarch.latency(t.op));
    let off = |fp: &[probe::cpu::FpTiming]| {
        fp.iter()
            .any(|t| (t.latency_cycles - published(t)).abs() > 1.0)
    };
    // Other work only ever adds cycles (a vCPU's slow second put fma at
    // 9.99 cycles against 4 once): each operation's least latency counts.
    let (fp, _) = least_disturbed(
        Some(Stage::Cpu),
        |r| r.cpu.iter().flat_map(|c| c.fp.clone()).collect::<Vec<_>>(),
        |fp| !off(fp),
        |mut kept, again| {
            for t in kept.iter_mut() {
                if let Some(a) = again
                    .iter()
                    .filter(|a| a.op == t.op && a.width == t.width)
                    .find(|a| a.latency_cycles < t.latency_cycles)
                {
                    *t = a.clone();
                }
            }
            kept
        },
    );
    for t in &fp {
        let published = published(t);
        assert!(
            (t.latency_cycles - published).abs() <= 1.0,
            "{} {}: {:.2} cycles measured, {published} published for {}",
            t.op.name(),
            t.width.name(),
            t.latency_cycles,
            uarch.name
        );
        // Pipelined: independent operations issue faster than one latency.
        assert!(t.recip_throughput_cycles < 0.75 * t.latency_cycles, "{t:?}");
    }
    let f = probe::documented::features();
    let widths = c.widths();
    assert_eq!(
        widths.contains(&probe::cpu::Width::Avx2),
        f.avx,
        "{widths:?}"
    );
    assert_eq!(
        widths.contains(&probe::cpu::Width::Avx512),
        f.avx512f,
        "{widths:?}"
    );
    assert!(!c.fp_registers.is_empty());
    for r in &c.fp_registers {
        let published = uarch.registers_for(r.isa).expect("measured only where run");
        assert!(
            r.measured.abs_diff(published) <= 1,
            "{} registers at {}, {published} published",
            r.measured,
            r.isa.name()
        );
    }
}

#[test]
fn core_clock_is_counted_in_cycles_of_one_integer_add() {
    let k = cpu().core_clock.as_ref().expect("core clock");
    assert!(k.measured_ghz > 0.5 && k.measured_ghz < 7.0, "{k:?}");
    // Against the TSC: boost and power states move the core clock, not by
    // more than these factors on any server part.
    let ratio = k.per_tsc_tick.expect("TSC measured");
    assert!(ratio > 0.3 && ratio < 3.0, "{k:?}");
    if let Some(doc) = k.documented_ghz.value {
        assert!(
            k.measured_ghz / doc > 0.3 && k.measured_ghz / doc < 3.0,
            "{k:?}"
        );
    }
}

#[test]
fn fma_is_measured_fused_and_faster_than_multiply_then_add() {
    let c = cpu();
    if !probe::documented::features().fma {
        assert_eq!(c.fma.fused, None);
        return;
    }
    assert_eq!(c.fma.documented.value, Some(true));
    assert_eq!(c.fma.fused, Some(true), "{:?}", c.fma);
    let (fma, separate) = (
        c.fma.fma_latency_cycles.unwrap(),
        c.fma.mul_then_add_latency_cycles.unwrap(),
    );
    assert!(fma + 0.5 < separate, "{:?}", c.fma);
}

#[test]
fn l1d_ways_equal_sysfs_and_l2_ways_where_measured() {
    let c = cpu();
    let l1 = c.l1d_ways.as_ref().expect("L1d associativity");
    let doc = l1.documented.value.expect("sysfs documents L1d ways here");
    // Other work on the core (an SMT sibling) only ever evicts a line
    // early, moving the step down a way (a run read 7 of 8, its eighth
    // way half-missed): the most ways read counts.
    let (ways, seen) = least_disturbed(
        Some(Stage::Cpu),
        |r| r.cpu.as_ref().and_then(|c| c.l1d_ways.as_ref()?.measured),
        |&w| w == Some(doc),
        Ord::max,
    );
    assert_eq!(ways, Some(doc), "each probe's reading: {seen:?}");
    // Where the L2's eviction sets find nothing (the target line still
    // reloads from the L2 after every line of the pool was read; see
    // docs/probe-tune.md), the probe says so in a note: said, not passed
    // off as a match.
    let l2 = c.l2_ways.as_ref().expect("L2 associativity attempted");
    match l2.measured {
        Some(w) => assert_eq!(Some(w), l2.documented.value, "{l2:?}"),
        None => {
            assert!(l2.note.as_deref().is_some_and(|n| !n.is_empty()), "{l2:?}");
            eprintln!("SKIPPED L2 ways: {}", l2.note.as_deref().unwrap_or(""));
        }
    }
}

#[test]
fn execution_contexts_match_the_topology_sysfs_documents() {
    let c = cpu();
    let x = c.contexts.as_ref().expect("contexts");
    let allowed = probe::documented::allowed_cpus();
    assert_eq!(x.cpus, allowed);
    if allowed.len() < 2 {
        eprintln!("SKIPPED pairs: one CPU allowed");
    } else {
        assert!(!x.pairs.is_empty());
    }
    // Two vCPUs on separate cores read as one core's two contexts while
    // the hypervisor runs them on one (each at half speed beside the
    // other: a quiet run here read a compute ratio of 0.499 once in ten);
    // other work only ever makes CPUs look shared, so a pair counts as
    // sharing a core only where every probe read it so.
    let sharing = |r: &ProbeResult| -> Vec<bool> {
        let pairs = r.cpu.as_ref().and_then(|c| c.contexts.as_ref());
        pairs.map_or(vec![], |x| x.pairs.iter().map(|p| p.shares_core).collect())
    };
    let documented: Vec<Option<bool>> = x
        .pairs
        .iter()
        .map(|p| p.documented_shares_core.value)
        .collect();
    let matches = |shares: &Vec<bool>| {
        shares.len() == documented.len()
            && shares
                .iter()
                .zip(&documented)
                .all(|(s, d)| d.is_none_or(|d| d == *s))
    };
    let (shares, seen) = least_disturbed(Some(Stage::Cpu), sharing, matches, |a, b| {
        a.iter().zip(&b).map(|(&x, &y)| x && y).collect()
    });
    assert!(
        matches(&shares),
        "pairs {:?}: sharing a core read {seen:?}, documented {documented:?}",
        x.pairs
    );
    let b = x.bandwidth.as_ref().expect("bandwidth");
    assert!(b.one_cpu_gb_s > 0.5 && b.one_cpu_gb_s < 1000.0, "{b:?}");
    // More readers never get less in total than one (allowing for noise).
    assert!(b.all_cpus_gb_s > 0.8 * b.one_cpu_gb_s, "{b:?}");
}

#[test]
fn a_stage_measured_again_replaces_only_its_own_readings() {
    let earlier = probed();
    let again = measure_alone(Some((Stage::Tlb, earlier)));
    // A new pointer chase: its times are not the earlier ones to the bit.
    assert_ne!(again.tlb_curve, earlier.tlb_curve);
    let mut rest = again.clone();
    (rest.tlb, rest.tlb_curve) = (earlier.tlb.clone(), earlier.tlb_curve.clone());
    assert_eq!(&rest, earlier, "only the TLB stage's fields may change");
}
