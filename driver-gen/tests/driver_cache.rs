//! Cache-state techniques, proven by their effect on measured time.
//! Every comparison takes the minimum over several driver runs and uses wide
//! margins: the machine is shared and noisy.

mod driver_support;
use driver_gen::flush_sweep;
use driver_support::*;
use spec_lang::ast::FlushMethod;

fn fast_opts() -> driver_gen::RunOptions {
    let mut o = opts();
    // Memory-bound build of the kernel: the flush shows in its time.
    o.cflags = vec!["-O3".into(), "-march=native".into()];
    o.timing.samples = Some(7);
    o
}

#[test]
fn flushed_dot_in_l2_is_at_least_1_5x_the_warm_time() {
    let _serial = exclusive();
    // 2 x 16384 doubles = 256 KiB: fits the 1 MiB L2, not the 32 KiB L1.
    let mut o = fast_opts();
    o.timing.min_interval_ns = Some(0); // one call per sample
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let at = |flush| {
        let mut o = o.clone();
        o.timing.flush = Some(flush);
        kit.min_of(&o, 3)
    };
    let warm = at(FlushMethod::None);
    let read = at(FlushMethod::Read);
    let clflush = at(FlushMethod::Clflush);
    eprintln!("warm {warm:.0} ns, read-flushed {read:.0} ns, clflushed {clflush:.0} ns");
    assert!(read >= 1.5 * warm, "read flush {read} vs warm {warm}");
    assert!(clflush >= 1.5 * warm, "clflush {clflush} vs warm {warm}");
}

#[test]
fn a_read_flush_meant_to_reach_memory_leaves_the_operands_cold_whatever_its_size() {
    let _serial = exclusive();
    // A full flush that is far too small (8 MiB against a 32 MiB L3): the
    // read alone leaves the 256 KiB operands in L3; the clflush that ends a
    // flush meant to reach memory must take them out anyway. The same size
    // chosen on the command line is read as chosen, a sweep's point.
    let mut o = fast_opts();
    o.timing.min_interval_ns = Some(0);
    let mut m = o.machine.clone().unwrap();
    m.full_flush_kib = Some(8 * 1024);
    m.full_flush_source = "test: a full flush too small for the L3".into();
    o.machine = Some(m);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let mut to_memory = o.clone();
    to_memory.timing.flush = Some(FlushMethod::Read);
    let r = kit.run(&to_memory);
    assert_eq!(r.flush_kib, 8 * 1024);
    assert!(r.flush_clflushes_operands, "{r:?}");
    let mut chosen = to_memory.clone();
    chosen.timing.flush_kib = Some(8 * 1024);
    assert!(!kit.run(&chosen).flush_clflushes_operands);
    let mut warm_o = o.clone();
    warm_o.timing.flush = Some(FlushMethod::None);
    // Interleaved, so a change in the machine's speed hits all three.
    let (mut warm, mut read_only, mut cold) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        warm = warm.min(kit.run(&warm_o).reported_ns);
        read_only = read_only.min(kit.run(&chosen).reported_ns);
        cold = cold.min(kit.run(&to_memory).reported_ns);
    }
    eprintln!("warm {warm:.0} ns, 8 MiB read {read_only:.0} ns, 8 MiB read + clflush {cold:.0} ns");
    assert!(cold >= 1.5 * warm, "read + clflush {cold} vs warm {warm}");
    assert!(
        cold >= 1.3 * read_only,
        "read + clflush {cold} vs the read alone {read_only}: the clflush made no difference"
    );
}

#[test]
fn self_flushing_working_sets_are_slower_than_repeated_warm_calls() {
    let _serial = exclusive();
    // Below the minimum interval: R calls per sample. Rotating through
    // working sets larger than the LLC must keep every call cold.
    let mut o = fast_opts();
    o.timing.min_interval_ns = Some(200_000);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let mut warm_o = o.clone();
    warm_o.timing.flush = Some(FlushMethod::None);
    let warm_r = kit.run(&warm_o);
    assert_eq!(warm_r.mode, "repeated");
    assert!(warm_r.reps_per_sample > 1);
    let cold_r = kit.run(&o);
    assert_eq!(cold_r.mode, "self-flushing");
    assert!(cold_r.working_sets > 2, "{}", cold_r.working_sets);
    // Together the sets exceed the flushed cache.
    let set_bytes: u64 = cold_r.operands.iter().map(|op| op.bytes).sum();
    assert!(set_bytes * cold_r.working_sets > cold_r.flush_kib * 1024);
    let warm = kit.min_of(&warm_o, 3).min(warm_r.reported_ns);
    let cold = kit.min_of(&o, 2).min(cold_r.reported_ns);
    eprintln!("repeated warm {warm:.0} ns/call, self-flushing {cold:.0} ns/call");
    assert!(cold >= 1.5 * warm, "self-flushing {cold} vs warm {warm}");
}

/// A flush sweep times one build at every size asked for, in order, and a
/// flush beyond the last-level cache leaves the operands cold. How the
/// time rises between the sizes is a benchmark (`scripts/bench-driver`'s
/// flush sweep): a band between neighbouring sizes is a comparison of two
/// timings within a percentage, which a shared host's drift can break.
#[test]
fn a_flush_sweep_times_every_size_and_the_largest_reads_cold() {
    let _serial = exclusive();
    let mut o = fast_opts();
    o.timing.min_interval_ns = Some(0);
    // The driver's adaptive sampling: 5 fixed samples read whichever state
    // the host was in.
    o.timing.samples = None;
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    // The largest size is the one that evicts everything: the probe's
    // measured full flush (2 x the sysfs LLC without a probe).
    let m = driver_gen::machine_defaults();
    let full = m
        .full_flush_kib
        .unwrap_or_else(|| m.llc().unwrap().kib * driver_gen::model::FLUSH_OVERSIZE);
    let sizes = [0, 256, 2048, full];
    // Per size, the minimum over two sweeps.
    let a = flush_sweep(&kit.built, &o, &sizes).unwrap();
    let b = flush_sweep(&kit.built, &o, &sizes).unwrap();
    let t: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.reported_ns.min(y.reported_ns))
        .collect();
    eprintln!("sweep {sizes:?} KiB -> {t:?} ns");
    let ran: Vec<u64> = a.iter().map(|r| r.flush_kib).collect();
    assert_eq!(ran, sizes, "one run per size, in order");
    // From memory against from L2: 4-6x on either host kind
    // (docs/benchmarks.md, drivers); 1.5x is far inside that.
    assert!(
        t[3] >= 1.5 * t[0],
        "a flush beyond the LLC must be cold: {t:?}"
    );
}

/// Sums two vectors of different lengths; which one is warm decides the time.
const SUM2_IMPL: &str = r#"
double sum2(const int n, const double *X, const int m, const double *Y) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i, j;
    for (i = 0; i + 8 <= n; i += 8) for (j = 0; j < 8; j++) s[j] += X[i + j];
    for (i = 0; i + 8 <= m; i += 8) for (j = 0; j < 8; j++) s[j] += Y[i + j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
"#;

fn sum2_spec(n: u32, x_attr: &str, m: u32, y_attr: &str) -> String {
    format!(
        "routine=double sum2(const int n, const double* X, const int m, const double* Y);\n\
         init={{ n={n}; m={m}; X=Vector(double, RANDOM, {x_attr}|align(64), n); \
         Y=Vector(double, RANDOM, {y_attr}|align(64), m); }};\n"
    )
}

#[test]
fn warm_operand_is_retouched_after_the_flush() {
    let _serial = exclusive();
    // Partial flush (paper section 3.1): a warm operand is re-read after the
    // flush, a flushed one is not. Shapes are chosen so each effect is large.
    let mut o = fast_opts();
    o.timing.min_interval_ns = Some(0);
    o.timing.flush = Some(FlushMethod::Read);
    let mut warm_o = o.clone();
    warm_o.timing.flush = Some(FlushMethod::None);

    // (a) 384 KiB warm X + 4 KiB flushed Y stays close to all-warm and far
    // from all-flushed.
    let big_x_warm = build(&sum2_spec(49152, "warm", 512, "flush"), SUM2_IMPL, &o);
    let big_x_cold = build(&sum2_spec(49152, "flush", 512, "flush"), SUM2_IMPL, &o);
    let part = big_x_warm.min_of(&o, 3);
    let cold = big_x_cold.min_of(&o, 3);
    let r = big_x_warm.run(&o);
    assert_eq!(
        (r.operands[0].cache.as_str(), r.operands[1].cache.as_str()),
        ("warm", "flushed")
    );
    eprintln!("X 384 KiB warm + Y 4 KiB flushed {part:.0} ns; both flushed {cold:.0} ns");
    assert!(
        part <= 0.75 * cold,
        "warm X must stay cached: {part} vs {cold}"
    );

    // (b) 4 KiB warm X + 384 KiB flushed Y is far slower than all-warm.
    let big_y_cold = build(&sum2_spec(512, "warm", 49152, "flush"), SUM2_IMPL, &o);
    let part = big_y_cold.min_of(&o, 3);
    let warm = big_y_cold.min_of(&warm_o, 3);
    eprintln!("X 4 KiB warm + Y 384 KiB flushed {part:.0} ns; all warm {warm:.0} ns");
    assert!(
        part >= 1.5 * warm,
        "flushed Y must be cold: {part} vs {warm}"
    );
}

#[test]
fn flush_on_every_cpu_really_runs_on_every_cpu() {
    let _serial = exclusive();
    let mut o = opts();
    o.timing.flush_all_cpus = true;
    o.timing.flush = Some(FlushMethod::Read);
    o.timing.flush_kib = Some(2048);
    o.timing.min_interval_ns = Some(0);
    o.timing.samples = Some(3);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let want = usable_cpus();
    let r = kit.run(&o);
    assert!(r.flush_all_cpus);
    assert_eq!(
        r.flush_cpus, want,
        "flush threads must have run on every CPU"
    );
    // Pinning the driver does not narrow the CPUs that get flushed.
    o.timing.pin_cpus = vec![want[0] as u32];
    let pinned = kit.run(&o);
    assert_eq!(pinned.flush_cpus, want);
}

/// This machine with a 300 MiB last-level cache and the 512 MiB full read
/// flush the probe measures on such a host (a 2-vCPU Xeon).
fn with_a_300_mib_l3(mut m: driver_gen::MachineDefaults) -> driver_gen::MachineDefaults {
    if let Some(llc) = m.caches.iter_mut().max_by_key(|c| c.level) {
        llc.kib = 300 * 1024;
    }
    m.full_flush_kib = Some(512 * 1024);
    m.full_flush_source = "test: the measured full flush of a 300 MiB L3".into();
    m
}

#[test]
fn a_full_flush_costs_what_it_must_evict_not_what_the_l3_holds() {
    let _serial = exclusive();
    // The README's first command (the paper's GEMM, flushed, one call per
    // sample, the default budget) on a machine claiming a 300 MiB L3: the
    // flush clflushes the operands and reads what the private caches and
    // the TLB hold, so it takes as many samples as on this machine's own
    // L3; a 512 MiB read per sample left it at 7.
    let mut o = opts();
    o.timing.samples = None;
    let here = o.machine.clone().unwrap();
    o.machine = Some(with_a_300_mib_l3(here.clone()));
    let gemm = std::fs::read_to_string(spec_path("gemm.spec")).unwrap();
    let imp = std::fs::read_to_string(spec_path("gemm.c")).unwrap();
    let kit = build(&gemm, &imp, &o);
    let big = kit.run(&o);
    let mut ours = o.clone();
    ours.machine = Some(here);
    let small = build(&gemm, &imp, &ours).run(&ours);
    let (e_big, e_small) = (
        big.flush_eviction.clone().expect("a targeted eviction"),
        small.flush_eviction.clone().expect("a targeted eviction"),
    );
    assert_eq!(
        (e_big.read_kib, e_big.tlb_pages),
        (e_small.read_kib, e_small.tlb_pages),
        "the eviction grew with the L3"
    );
    assert!(e_big.read_kib < 300 * 1024 / 8, "{e_big:?}");
    let cost = big.flush_ns_per_sample.expect("measured per sample");
    eprintln!(
        "300 MiB L3: {} samples, flush {cost:.0} ns per sample, GEMM {:.0} ns",
        big.samples_ns.len(),
        big.reported_ns
    );
    assert!(
        cost <= (2e6f64).max(big.reported_ns),
        "the flush costs {cost:.0} ns per sample"
    );
    assert!(
        big.samples_ns.len() >= 30,
        "{} samples in the default budget",
        big.samples_ns.len()
    );
    assert!(
        big.flush_clflushes_operands && big.mode == "single-call",
        "{big:?}"
    );
}
