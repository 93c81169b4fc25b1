"""Coverage of evalkit's 95% intervals on simulated data with a known truth.

For every kind of interval the metrics produce (proportions, precision/recall/agreement,
clustered proportions, means, percentiles, kappa, Pearson, Brier, ECE, cost per success),
at n = 20, 70 and 300, draw ``--reps`` samples from a population whose value is known, compute
the interval with the code the metrics use, and print the share of intervals that cover the
truth (an open bound covers its side). Goal: 93-97%, none below 90%. The last-but-one row is
the bootstrap interval of the binned ECE that evalkit does *not* give, and why.

    .venv/bin/python bench/bench_coverage.py            # ~3 min on 2 cores
    .venv/bin/python bench/bench_coverage.py --reps 200 --n-boot 500   # a quick look
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from evalkit.metrics import _pair_statistics as ps
from evalkit.metrics._intervals import clustered_proportion_ci, quantile_interval
from evalkit.metrics._stats import mean_ci
from evalkit.metrics.cost_per_success import _ratio_rows
from evalkit.metrics.ece import calibration

SIGMA = 0.75  # lognormal latencies: log-sd (p99/p50 ≈ 5.7)
PREVALENCE, SENSITIVITY, SPECIFICITY = 0.4, 0.8, 0.9  # a judge against the truth
P_SUCCESS = 0.6


def _z(q: float) -> float:
    from statistics import NormalDist
    return NormalDist().inv_cdf(q)


def _judge(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    truth = (rng.random(n) < PREVALENCE).astype(float)
    hit = rng.random(n)
    pred = np.where(truth == 1, hit < SENSITIVITY, hit >= SPECIFICITY).astype(float)
    return pred, truth


def _calibration_sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    p = rng.random(n)
    y = (rng.random(n) < p ** 1.3).astype(float)  # over-confident: accuracy p^1.3
    return p, y


def _true_ece(n_bins: int = 10) -> float:
    """The population's binned ECE (equal-width bins, p ~ U(0, 1), accuracy p^1.3)."""
    ece = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        conf = (lo + hi) / 2
        acc = (hi ** 2.3 - lo ** 2.3) / 2.3 / (hi - lo)
        ece += (hi - lo) * abs(acc - conf)
    return ece


TP = PREVALENCE * SENSITIVITY
FP = (1 - PREVALENCE) * (1 - SPECIFICITY)
PO = TP + (1 - PREVALENCE) * SPECIFICITY
PRED_POS = TP + FP
PE = PRED_POS * PREVALENCE + (1 - PRED_POS) * (1 - PREVALENCE)
CITES_SUPPORT = 0.85

# the binned ECE gets no interval in evalkit: this row shows why (a bootstrap around it)
UNUSED_ECE = "ece: bootstrap (not given)"

Interval = tuple[float | None, float | None]
# kind -> (truth, draw one sample and return its interval)
Kind = tuple[float, Callable[[np.random.Generator, int, int, int], Interval]]


def _boot(fn: ps.Batch, cols: list[np.ndarray], n_boot: int, seed: int, **kw) -> Interval:
    return ps.bootstrap(cols, {"s": fn}, n_boot, seed, 0.95, **kw)["s"]


def kinds() -> dict[str, Kind]:
    """Every interval kind, with its truth and a sampler returning the interval."""
    lat_mean = float(np.exp(SIGMA ** 2 / 2))

    def quantile(q: float) -> Kind:
        return float(np.exp(SIGMA * _z(q))), lambda rng, n, b, s: quantile_interval(
            np.sort(rng.lognormal(0, SIGMA, n)), q, 0.95)[:2]

    def proportion(p: float) -> Kind:
        return p, lambda rng, n, b, s: mean_ci((rng.random(n) < p).astype(float), b, s)[:2]

    def confusion(stat: str, truth: float) -> Kind:
        def draw(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
            pred, true = _judge(rng, n)
            return ps.proportion_ci(stat, pred, true, 0.95)
        return truth, draw

    def clustered(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        cites = rng.poisson(1.5, n) + 1
        rate = rng.beta(CITES_SUPPORT * 4, (1 - CITES_SUPPORT) * 4, n)  # records differ
        return clustered_proportion_ci(rng.binomial(cites, rate).astype(float),
                                       cites.astype(float))

    def pearson(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        x = rng.standard_normal(n)
        y = 0.5 * x + np.sqrt(0.75) * rng.standard_normal(n)
        return _boot(ps.pearson, [x, y], b, s)

    def kappa(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        return _boot(ps.cohen_kappa, list(_judge(rng, n)), b, s)

    def calib(k: int) -> Callable[[np.random.Generator, int, int, int], Interval]:
        def draw(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
            return _boot(lambda p, y: calibration(p, y)[k], list(_calibration_sample(rng, n)),
                         b, s)
        return draw

    def cost(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        c = rng.lognormal(np.log(0.01), 0.5, n)
        won = (rng.random(n) < P_SUCCESS).astype(float)
        return _boot(_ratio_rows, [c, won], b, s, method="inverted_cdf")

    brier = 1 / 3 - 2 / 3.3 + 1 / 2.3  # E[(p - y)^2] = E[p^2] - 2E[p^{2.3}] + E[p^{1.3}]
    return {
        "proportion p=0.5 (rate)": proportion(0.5),
        "proportion p=0.1 (rate)": proportion(0.1),
        "proportion p=0.02 (rate)": proportion(0.02),
        "precision": confusion("precision", TP / PRED_POS),
        "recall": confusion("recall", SENSITIVITY),
        "accuracy / agreement": confusion("accuracy", PO),
        "citation precision (clustered)": (CITES_SUPPORT, clustered),
        "mean latency (bootstrap-t)": (lat_mean, lambda rng, n, b, s: mean_ci(
            rng.lognormal(0, SIGMA, n), b, s)[:2]),
        "latency p50": quantile(0.5),
        "latency p95": quantile(0.95),
        "latency p99": quantile(0.99),
        "kappa": ((PO - PE) / (1 - PE), kappa),
        "pearson r=0.5": (0.5, pearson),
        "brier (bootstrap-t)": (brier, lambda rng, n, b, s: mean_ci(
            (lambda p, y: (p - y) ** 2)(*_calibration_sample(rng, n)), b, s)[:2]),
        UNUSED_ECE: (_true_ece(), calib(0)),
        "cost per success": (0.01 * np.exp(0.125) / P_SUCCESS, cost),
    }


def covers(ci: Interval, truth: float) -> bool:
    lo, hi = ci
    if lo is None and hi is None:
        return False  # no interval at all is not coverage
    return (lo is None or lo <= truth) and (hi is None or truth <= hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="samples per kind and n")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 70, 300])
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"95% intervals, share covering the truth over {args.reps} samples "
          f"(bootstrap: {args.n_boot} resamples); goal 93-97%, none below 90%")
    print(f"{'interval':34s}" + "".join(f"{'n=' + str(n):>9s}" for n in args.sizes))
    worst = 1.0
    for name, (truth, draw) in kinds().items():
        cells = []
        for n in args.sizes:
            rng = np.random.default_rng([n, len(name)])
            hits = sum(covers(draw(rng, n, args.n_boot, rep), truth) for rep in range(args.reps))
            share = hits / args.reps
            if name != UNUSED_ECE:
                worst = min(worst, share)
            cells.append(f"{share:9.1%}")
        print(f"{name:34s}" + "".join(cells))
    print(f"lowest coverage of an interval evalkit gives: {worst:.1%} (Monte-Carlo "
          f"standard error of a share near 95% over {args.reps} samples: "
          f"{np.sqrt(0.95 * 0.05 / args.reps):.1%})")
    # the bootstrap's own Monte-Carlo error: the bounds of one sample over seeds
    x = np.random.default_rng(0).lognormal(0, SIGMA, 70)
    bounds = np.array([mean_ci(x, args.n_boot, seed)[:2] for seed in range(50)])
    se = x.std(ddof=1) / np.sqrt(len(x))
    print(f"bootstrap bounds over 50 seeds (mean latency, n=70): sd {bounds[:, 0].std():.4f} "
          f"(low), {bounds[:, 1].std():.4f} (high) = "
          f"{bounds[:, 0].std() / se:.3f} and {bounds[:, 1].std() / se:.3f} standard errors")
    print(f"took {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
