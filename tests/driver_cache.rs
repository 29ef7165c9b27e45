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
    o.samples = Some(7);
    o
}

#[test]
fn flushed_dot_in_l2_is_at_least_1_5x_the_warm_time() {
    // 2 x 16384 doubles = 256 KiB: fits the 1 MiB L2, not the 32 KiB L1.
    let mut o = fast_opts();
    o.min_interval_ns = Some(0); // one call per sample
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let at = |flush| {
        let mut o = o.clone();
        o.flush = Some(flush);
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
fn self_flushing_working_sets_are_slower_than_repeated_warm_calls() {
    // Below the minimum interval: R calls per sample. Rotating through
    // working sets larger than the LLC must keep every call cold.
    let mut o = fast_opts();
    o.min_interval_ns = Some(200_000);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let mut warm_o = o.clone();
    warm_o.flush = Some(FlushMethod::None);
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

#[test]
fn flush_sweep_rises_monotonically_within_noise() {
    let mut o = fast_opts();
    o.min_interval_ns = Some(0);
    o.samples = Some(5);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let llc = driver_gen::machine_defaults().llc().unwrap().kib;
    let sizes = [0, 256, 2048, llc * 2];
    // Per size, the minimum over two sweeps.
    let a = flush_sweep(&kit.built, &o, &sizes).unwrap();
    let b = flush_sweep(&kit.built, &o, &sizes).unwrap();
    let t: Vec<f64> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x.reported_ns.min(y.reported_ns))
        .collect();
    eprintln!("sweep {sizes:?} KiB -> {t:?} ns");
    for w in t.windows(2) {
        assert!(w[1] >= 0.85 * w[0], "not monotone within noise: {t:?}");
    }
    assert!(
        t[3] >= 1.5 * t[0],
        "a flush beyond the LLC must be cold: {t:?}"
    );
    assert_eq!(a[0].flush_kib, 0);
    assert_eq!(a[3].flush_kib, llc * 2);
}

#[test]
fn warm_operand_is_retouched_after_the_flush() {
    // X warm, Y flushed: the partial flush lands between all-warm and all-cold.
    let partial = DOT_SPEC.replace(
        "X=Vector(double, RANDOM, flush|align(64), N);",
        "X=Vector(double, RANDOM, warm|align(64), N);",
    );
    let mut o = fast_opts();
    o.min_interval_ns = Some(0);
    o.flush = Some(FlushMethod::Read);
    let both = build(DOT_SPEC, &dot_impl(), &o);
    let half = build(&partial, &dot_impl(), &o);
    let cold = both.min_of(&o, 3);
    let part = half.min_of(&o, 3);
    let mut wo = o.clone();
    wo.flush = Some(FlushMethod::None);
    let warm = both.min_of(&wo, 3);
    let r = half.run(&o);
    assert_eq!(r.operands[0].cache, "warm");
    assert_eq!(r.operands[1].cache, "flushed");
    eprintln!("all warm {warm:.0} ns, X warm + Y flushed {part:.0} ns, both flushed {cold:.0} ns");
    assert!(
        part <= 0.9 * cold,
        "warm X should save time: {part} vs {cold}"
    );
    assert!(
        part >= 1.1 * warm,
        "flushed Y should cost time: {part} vs {warm}"
    );
}

#[test]
fn flush_on_every_cpu_really_runs_on_every_cpu() {
    let mut o = opts();
    o.flush_all_cpus = true;
    o.flush = Some(FlushMethod::Read);
    o.flush_kib = Some(2048);
    o.min_interval_ns = Some(0);
    o.samples = Some(3);
    let kit = build(DOT_SPEC, &dot_impl(), &o);
    let r = kit.run(&o);
    let n = std::thread::available_parallelism().unwrap().get() as i32;
    let want: Vec<i32> = (0..n).collect();
    assert!(r.flush_all_cpus);
    assert_eq!(
        r.flush_cpus, want,
        "flush threads must have run on every CPU"
    );
}
