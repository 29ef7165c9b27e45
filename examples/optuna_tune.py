#!/usr/bin/env python3
"""Tune a spec's compile-time parameters with Optuna, one `tdg run
--cost-only` per candidate: the one-evaluation contract of
docs/integration.md, driven by a general-purpose tuner.

Each trial exports its parameters as TDG_PARAM_<NAME> (no -D plumbing), runs
tdg, and reads one number, the reported time per call in seconds, from
stdout. The exit status says why a candidate has no time: a candidate that
does not compile (3), crashes (4), times out (5) or computes wrong results (6)
is a failed trial and the study goes on; a bad spec or command line (2), a
machine that is not ready (7) or anything else stops the study, since every
other candidate would fail the same way.

    examples/optuna_tune.py specs/blocked_gemm.spec --impl specs/blocked_gemm.c \\
        -D MS=256 -D NS=256 -D KS=256 \\
        --param NB=32:128:32 --param MU=1:8 --param NU=1:4 --trials 32

prints the best configuration and writes every trial with --out FILE (JSON).
"""

import argparse
import json
import os
import subprocess
import sys

import optuna

# The contract's statuses for a candidate that failed on its own.
CANDIDATE_FAILED = {3: "compile", 4: "crash", 5: "timeout", 6: "verification"}


class CandidateFailed(Exception):
    """This configuration has no time; others may."""


def parse_param(text):
    """NAME=LO:HI[:STEP] (as `tdg tune --param`) -> (name, lo, hi, step)."""
    name, _, rng = text.partition("=")
    parts = rng.split(":")
    if not name or len(parts) not in (2, 3):
        sys.exit(f"--param {text}: expected NAME=LO:HI[:STEP], e.g. NB=32:128:32")
    lo, hi = int(parts[0]), int(parts[1])
    step = int(parts[2]) if len(parts) == 3 else 1
    return name, lo, hi, step


def objective_for(args, params):
    def objective(trial):
        values = {n: trial.suggest_int(n, lo, hi, step=step) for n, lo, hi, step in params}
        env = dict(os.environ)
        env.update({f"TDG_PARAM_{n}": str(v) for n, v in values.items()})
        cmd = [args.tdg, "run", args.spec, "--impl", args.impl, "--cost-only"]
        for d in args.define:
            cmd += ["-D", d]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode == 0:
            return float(done.stdout.strip())
        why = done.stderr.strip().splitlines()[:1]
        if done.returncode in CANDIDATE_FAILED:
            trial.set_user_attr("failure", CANDIDATE_FAILED[done.returncode])
            raise CandidateFailed(why[0] if why else "")
        sys.exit(f"tdg exited with status {done.returncode}: {why[0] if why else ''}")

    return objective


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("spec")
    p.add_argument("--impl", required=True)
    p.add_argument("-D", dest="define", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--param", action="append", required=True, metavar="NAME=LO:HI[:STEP]")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tdg", default="tdg", help="the tdg binary (default: tdg on PATH)")
    p.add_argument("--out", help="write the best and every trial here (JSON)")
    args = p.parse_args()
    params = [parse_param(t) for t in args.param]

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize", sampler=optuna.samplers.TPESampler(seed=args.seed)
    )
    study.optimize(objective_for(args, params), n_trials=args.trials, catch=(CandidateFailed,))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        sys.exit("no trial produced a time; see the failures above")
    best = study.best_trial
    result = {
        "best": best.params,
        "best_s": best.value,
        "trials": len(study.trials),
        "failed": len(study.trials) - len(done),
        "history": [
            {"params": t.params, "seconds": t.value, "failure": t.user_attrs.get("failure")}
            for t in study.trials
        ],
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    described = " ".join(f"{k}={v}" for k, v in best.params.items())
    print(f"best {described}: {best.value * 1e3:.3f} ms per call "
          f"({len(done)} of {len(study.trials)} trials timed)")


if __name__ == "__main__":
    main()
