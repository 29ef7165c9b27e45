"""Whole-program timing for the autotune benches: a program run with or
without a preloaded library, and the sign-test interval of a median of
paired ratios (the statistic `tdg autotune` proves with)."""
import math
import os
import subprocess
import time


def run(program, preload=None):
    """Seconds of one run of `program` (a list), and its standard output."""
    env = dict(os.environ, LD_PRELOAD=preload) if preload else None
    t = time.perf_counter()
    r = subprocess.run(program, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    assert r.returncode == 0, f"{program} with LD_PRELOAD={preload}: {r.returncode} {r.stderr.decode()[-400:]}"
    return dt, r.stdout


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def interval(xs, conf=0.95):
    """The distribution-free interval of the median: order statistics."""
    xs = sorted(xs)
    n = len(xs)
    best = None
    cdf = 0.0
    for i in range(n // 2):
        cdf += math.comb(n, i) / 2**n
        if 1 - 2 * cdf < conf:
            break
        best = i + 1
    return (xs[best - 1], xs[n - best]) if best else (float("nan"), float("nan"))


def paired(program, a, b, rounds):
    """Per round the ratio time(a) / time(b), the two runs back to back,
    their order alternating (None: the plain program)."""
    ratios = []
    for r in range(rounds):
        if r % 2 == 0:
            ta = run(program, a)[0]
            tb = run(program, b)[0]
        else:
            tb = run(program, b)[0]
            ta = run(program, a)[0]
        ratios.append(ta / tb)
    return ratios


def text(ratios):
    lo, hi = interval(ratios)
    return f"{median(ratios):.3f}x ({lo:.3f}-{hi:.3f})"
