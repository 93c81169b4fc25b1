"""How often does the regression gate fail a build for nothing, and how often does it catch a
real regression? Simulated paired runs with a known truth, through the same tests
``evalkit compare --gate`` and ``runner.baseline`` use (:mod:`evalkit.comparison`).

Printed:

1. A rate gate (``METRIC:+0``, McNemar's exact test): runs of n records, a 30% flag rate,
   judge noise that flips 10% of the records (as many each way); the share of simulations
   in which the gate fails when nothing changed (false alarms; goal ≤ 2.5%, the one-sided
   level of a 95% interval) and when the rate truly rose by 3, 5 or 10 points (power).
2. A mean gate with a tolerance (``METRIC:+0.02``, paired bootstrap): per-record score
   changes with spread 0.3; false alarms when B is worse by exactly the tolerance (the edge
   of "allowed") and when nothing changed, power when worse by the tolerance + 0.05 / 0.1.
3. Many rows at once: 20 unchanged rates tested together; the share of comparisons that
   call at least one of them significant, with no correction, Holm and Benjamini–Hochberg
   (goal ≤ 5% for Holm).
4. Seeds: one borderline change (bootstrap p ≈ 0.05) judged by 7 seeds and by 100 seeds,
   at 200 resamples (the old default) and at 3,200 (the most compare draws for a row whose
   verdict is within Monte-Carlo error of the bar); how many seeds call it significant.

    python bench/bench_gate.py [--sims 2000] [--seed 0]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalkit.comparison import (  # noqa: E402
    MAX_BOOT,
    adjust,
    bootstrap_test,
    gate_test,
    mcnemar_exact,
)
from evalkit.comparison._compare import MC_Z  # noqa: E402

LEVEL = 0.025  # one-sided: the 95% interval lies wholly past the tolerance


def binary_pair(rng: np.random.Generator, n: int, rise: float) -> tuple[int, int]:
    """(worse, better) flip counts of a paired rate: 10% judge churn both ways, then
    ``rise`` of the records become flagged (a true rise of ``rise`` in the rate)."""
    a = rng.random(n) < 0.3
    b = a.copy()
    churn = rng.random(n) < 0.1
    up = rng.random(n) < 0.5
    a[churn], b[churn] = ~up[churn], up[churn]
    newly = np.flatnonzero(~b)
    b[rng.choice(newly, min(len(newly), round(rise * n)), replace=False)] = True
    return int(np.sum(b & ~a)), int(np.sum(a & ~b))


def rate_gate(rng: np.random.Generator, sims: int) -> None:
    print("1. rate gate METRIC:+0 (McNemar exact), 30% flag rate, 10% judge churn")
    for n in (100, 300, 1000):
        cells = []
        for rise in (0.0, 0.03, 0.05, 0.10):
            fails = sum(gate_test(0.0, flips=binary_pair(rng, n, rise))[1] <= LEVEL
                        for _ in range(sims))
            cells.append(f"{'false alarms' if rise == 0 else f'+{rise:.2f}'} "
                         f"{fails / sims:.3f}")
        print(f"   n={n:5d}: " + ", ".join(cells))


def mean_gate(rng: np.random.Generator, sims: int, n_boot: int = 400) -> None:
    print(f"2. mean gate METRIC:+0.02 (paired bootstrap, {n_boot} resamples, more near the "
          f"bar up to {MAX_BOOT}), n=200, spread 0.3")
    n, tol = 200, 0.02
    cells = []
    for label, shift in (("null at the tolerance", tol), ("no change", 0.0),
                         ("worse by tol+0.05", tol + 0.05), ("worse by tol+0.10", tol + 0.1)):
        fails = fixed = 0
        for _ in range(sims):
            d = rng.normal(shift, 0.3, n)
            boot = d[rng.integers(0, n, (n_boot, n))].mean(axis=1)
            fixed += gate_test(tol, boot)[1] <= LEVEL
            # as compare does: a p-value within Monte-Carlo error of the bar gets more
            # resamples (doubling), up to MAX_BOOT
            _, p, mc = gate_test(tol, boot)
            while abs(p - LEVEL) <= MC_Z * mc and len(boot) < MAX_BOOT:
                more = d[rng.integers(0, n, (len(boot), n))].mean(axis=1)
                boot = np.concatenate([boot, more])
                _, p, mc = gate_test(tol, boot)
            fails += p <= LEVEL
        cells.append(f"{label} {fails / sims:.3f} ({fixed / sims:.3f} at {n_boot} alone)")
    print("   " + ", ".join(cells))


def many_rows(rng: np.random.Generator, sims: int, rows: int = 20) -> None:
    print(f"3. {rows} unchanged rates compared at once (n=300 each): share of comparisons "
          "with at least one 'significant' row")
    hits = {"none": 0, "holm": 0, "bh": 0}
    for _ in range(sims):
        p = [mcnemar_exact(*binary_pair(rng, 300, 0.0)) for _ in range(rows)]
        for method in hits:
            hits[method] += any(q <= 0.05 for q in adjust(p, method))  # type: ignore[operator]
    print("   " + ", ".join(f"{m} {h / sims:.3f}" for m, h in hits.items()))


def seeds(rng: np.random.Generator) -> None:
    print("4. one borderline change (n=120, bootstrap p ≈ 0.05), verdicts across seeds")
    n = 120
    d = rng.normal(0.0, 1.0, n)
    d = d - d.mean() + 1.96 * d.std(ddof=1) / np.sqrt(n) * 1.02  # just past the bar
    for n_boot in (200, 3200):
        for count in (7, 100):
            sig, errs = 0, []
            for s in range(count):
                r = np.random.default_rng(s)
                idx = r.integers(0, n, (n_boot, n))
                t = bootstrap_test(d[idx].mean(axis=1))
                sig += t.p_value <= 0.05
                errs.append(t.mc_error)
            print(f"   {n_boot:5d} resamples: significant at {sig} of {count} seeds "
                  f"(Monte-Carlo error of p ±{np.mean(errs):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    rate_gate(rng, args.sims)
    mean_gate(rng, args.sims)
    many_rows(rng, max(200, args.sims // 4))
    seeds(rng)
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
