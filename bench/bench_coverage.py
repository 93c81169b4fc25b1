"""Coverage of evalkit's 95% intervals on simulated data with a known truth.

For every kind of interval the metrics produce (proportions, precision/recall/agreement,
clustered proportions, means, percentiles, kappa and nominal alpha, Pearson, Brier, ECE, cost
per success), at n = 20, 70 and 300, compute the interval with the code the metrics use and
print the share of intervals that cover the truth (an open bound covers its side). Goal:
93-97%, none below 90%.

- Proportions (Wilson) are exact: the coverage is summed over every outcome k = 0..n (and
  over the random denominator of precision and recall) with its binomial probability. That
  IS the method's coverage, with no Monte-Carlo error.
- The other kinds are simulated: ``--reps`` samples a cell for the closed forms (order
  statistics, clustered Wilson, kappa's Wilson line), ``--boot-reps`` for the bootstraps,
  each cell printed with its Monte-Carlo standard error (±).

The last-but-one row is the bootstrap interval of the binned ECE that evalkit does *not*
give, and why.

    .venv/bin/python bench/bench_coverage.py            # 16 min at load 9-10 on 2 cores
    .venv/bin/python bench/bench_coverage.py --reps 2000 --boot-reps 300   # a quick look
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as st

from evalkit.metrics import _pair_statistics as ps
from evalkit.metrics._intervals import clustered_proportion_ci, quantile_interval
from evalkit.metrics._stats import mean_ci
from evalkit.metrics.cost_per_success import _ratio_rows
from evalkit.metrics.ece import calibration

SIGMA = 0.75  # lognormal latencies: log-sd (p99/p50 ≈ 5.7)
PREVALENCE, SENSITIVITY, SPECIFICITY = 0.4, 0.8, 0.9  # a judge against the truth
P_SUCCESS = 0.6
CLOSE = (0.95, 0.95)  # two judges that agree closely: sensitivity, specificity


def _judge(rng: np.random.Generator, n: int, sens: float = SENSITIVITY,
           spec: float = SPECIFICITY) -> tuple[np.ndarray, np.ndarray]:
    truth = (rng.random(n) < PREVALENCE).astype(float)
    hit = rng.random(n)
    pred = np.where(truth == 1, hit < sens, hit >= spec).astype(float)
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


def _agreement_truth(sens: float, spec: float) -> tuple[float, float]:
    """The population's Cohen's kappa and nominal Krippendorff's alpha of the judge
    against the truth (alpha's large-sample limit: chance agreement from pooled margins)."""
    tp = PREVALENCE * sens
    po = tp + (1 - PREVALENCE) * spec
    pred_pos = tp + (1 - PREVALENCE) * (1 - spec)
    pe = pred_pos * PREVALENCE + (1 - pred_pos) * (1 - PREVALENCE)
    pooled = (pred_pos + PREVALENCE) / 2
    return (po - pe) / (1 - pe), 1 - (1 - po) / (1 - pooled ** 2 - (1 - pooled) ** 2)


TP = PREVALENCE * SENSITIVITY
FP = (1 - PREVALENCE) * (1 - SPECIFICITY)
PO = TP + (1 - PREVALENCE) * SPECIFICITY
PRED_POS = TP + FP
CITES_SUPPORT = 0.85


def _likert(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two judges' 1-5 scores: a latent correlation of 0.6, cut into five uneven levels."""
    x = rng.standard_normal(n)
    y = 0.6 * x + 0.8 * rng.standard_normal(n)
    cuts = [-1.2, -0.4, 0.3, 1.0]
    return np.digitize(x, cuts) + 1.0, np.digitize(y, cuts) + 1.0


def _skewed(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two judges' probabilities in (0, 1), skewed towards 1 (a logistic of a latent
    correlation of 0.6)."""
    x = rng.standard_normal(n)
    y = 0.6 * x + 0.8 * rng.standard_normal(n)
    return 1 / (1 + np.exp(-(1.5 * x + 1.5))), 1 / (1 + np.exp(-(1.5 * y + 1.5)))


def _population_r(draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
                  ) -> float:
    """The population's Pearson r, from 4M draws (its error, about 4e-4, is far below a
    bootstrap interval's width at 300 records)."""
    x, y = draw(np.random.default_rng(2026), 4_000_000)
    return float(np.corrcoef(x, y)[0, 1])


# the binned ECE gets no interval in evalkit: this row shows why (a bootstrap around it)
UNUSED_ECE = "ece: bootstrap (not given)"

Interval = tuple[float | None, float | None]
Draw = Callable[[np.random.Generator, int, int, int], Interval]


def covers(ci: Interval, truth: float) -> bool:
    lo, hi = ci
    if lo is None and hi is None:
        return False  # no interval at all is not coverage
    return (lo is None or lo <= truth) and (hi is None or truth <= hi)


# --- exact coverage of the proportions: every outcome weighted by its probability -------

def _ones(k: int, n: int) -> np.ndarray:
    return np.r_[np.ones(k), np.zeros(n - k)]


def exact_rate(p: float) -> Callable[[int], float]:
    """Coverage of a rate's interval (``mean_ci`` of 0/1 values: Wilson) at n."""
    def coverage(n: int) -> float:
        pmf = st.binom.pmf(np.arange(n + 1), n, p)
        return float(sum(pmf[k] for k in range(n + 1)
                         if covers(mean_ci(_ones(k, n), 1000, 0)[:2], p)))
    return coverage


def exact_confusion(stat: str, truth: float, p_trials: float | None
                    ) -> Callable[[int], float]:
    """Coverage of ``ps.proportion_ci(stat)`` at n: ``p_trials`` is the chance a record
    is in the denominator (None: every record is), ``truth`` the chance it is a hit."""
    def one(k: int, m: int, n: int) -> Interval:
        # m records in the denominator, k of them hits; the rest count for neither side
        if stat == "precision":   # pred = 1 on m records, truth = 1 on k of them
            pred, true = _ones(m, n), np.r_[_ones(k, m), np.zeros(n - m)]
        elif stat == "recall":    # truth = 1 on m records, pred = 1 on k of them
            true, pred = _ones(m, n), np.r_[_ones(k, m), np.zeros(n - m)]
        else:                     # accuracy: pred equals truth on k records
            pred, true = _ones(n, n), _ones(k, n)
        return ps.proportion_ci(stat, pred, true, 0.95)

    def coverage(n: int) -> float:
        total = 0.0
        outer = [(n, 1.0)] if p_trials is None else \
            list(zip(range(n + 1), st.binom.pmf(np.arange(n + 1), n, p_trials), strict=True))
        for m, pm in outer:
            if pm < 1e-15:
                continue
            pk = st.binom.pmf(np.arange(m + 1), m, truth)
            total += pm * sum(pk[k] for k in range(m + 1) if covers(one(k, m, n), truth))
        return total
    return coverage


# --- simulated kinds -----------------------------------------------------------------

def _boot(fn: ps.Batch, cols: list[np.ndarray], n_boot: int, seed: int, **kw) -> Interval:
    return ps.bootstrap(cols, {"s": fn}, n_boot, seed, 0.95, **kw)["s"]


def simulated() -> dict[str, tuple[float, Draw, bool]]:
    """Every simulated interval kind: its truth, a sampler returning the interval, and
    whether it draws a bootstrap (those get ``--boot-reps`` samples)."""
    lat_mean = float(np.exp(SIGMA ** 2 / 2))

    def quantile(q: float) -> tuple[float, Draw, bool]:
        return float(np.exp(SIGMA * st.norm.ppf(q))), lambda rng, n, b, s: quantile_interval(
            np.sort(rng.lognormal(0, SIGMA, n)), q, 0.95)[:2], False

    def clustered(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        cites = rng.poisson(1.5, n) + 1
        rate = rng.beta(CITES_SUPPORT * 4, (1 - CITES_SUPPORT) * 4, n)  # records differ
        return clustered_proportion_ci(rng.binomial(cites, rate).astype(float),
                                       cites.astype(float))

    def agreement(stat: str, sens: float, spec: float) -> Draw:
        def draw(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
            return ps.agreement_ci(stat, *_judge(rng, n, sens, spec), 0.95)
        return draw

    def pearson(draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]],
                ) -> Draw:
        return lambda rng, n, b, s: _boot(ps.pearson, list(draw(rng, n)), b, s)

    def normal_pair(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal(n)
        return x, 0.5 * x + np.sqrt(0.75) * rng.standard_normal(n)

    def calib(k: int) -> Draw:
        def draw(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
            return _boot(lambda p, y: calibration(p, y)[k], list(_calibration_sample(rng, n)),
                         b, s)
        return draw

    def cost(rng: np.random.Generator, n: int, b: int, s: int) -> Interval:
        c = rng.lognormal(np.log(0.01), 0.5, n)
        won = (rng.random(n) < P_SUCCESS).astype(float)
        return _boot(_ratio_rows, [c, won], b, s, method="inverted_cdf")

    kappa, alpha = _agreement_truth(SENSITIVITY, SPECIFICITY)
    kappa_close, alpha_close = _agreement_truth(*CLOSE)
    brier = 1 / 3 - 2 / 3.3 + 1 / 2.3  # E[(p - y)^2] = E[p^2] - 2E[p^{2.3}] + E[p^{1.3}]
    return {
        "citation precision (clustered)": (CITES_SUPPORT, clustered, False),
        "mean latency (bootstrap-t)": (lat_mean, lambda rng, n, b, s: mean_ci(
            rng.lognormal(0, SIGMA, n), b, s)[:2], True),
        "latency p50": quantile(0.5),
        "latency p95": quantile(0.95),
        "latency p99": quantile(0.99),
        "kappa": (kappa, agreement("kappa", SENSITIVITY, SPECIFICITY), False),
        "kappa, judges agreeing 95%": (kappa_close, agreement("kappa", *CLOSE), False),
        "nominal alpha": (alpha, agreement("alpha_nominal", SENSITIVITY, SPECIFICITY), False),
        "nominal alpha, agreeing 95%": (alpha_close, agreement("alpha_nominal", *CLOSE),
                                        False),
        "pearson r=0.5 (normal)": (0.5, pearson(normal_pair), True),
        "pearson (1-5 scores)": (_population_r(_likert), pearson(_likert), True),
        "pearson (skewed 0-1 scores)": (_population_r(_skewed), pearson(_skewed), True),
        "brier (bootstrap-t)": (brier, lambda rng, n, b, s: mean_ci(
            (lambda p, y: (p - y) ** 2)(*_calibration_sample(rng, n)), b, s)[:2], True),
        UNUSED_ECE: (_true_ece(), calib(0), True),
        "cost per success": (0.01 * np.exp(0.125) / P_SUCCESS, cost, True),
    }


def exact() -> dict[str, Callable[[int], float]]:
    """The proportions, whose coverage is summed exactly."""
    return {
        "proportion p=0.5 (rate)": exact_rate(0.5),
        "proportion p=0.1 (rate)": exact_rate(0.1),
        "proportion p=0.02 (rate)": exact_rate(0.02),
        "precision": exact_confusion("precision", TP / PRED_POS, PRED_POS),
        "recall": exact_confusion("recall", SENSITIVITY, PREVALENCE),
        "accuracy / agreement": exact_confusion("accuracy", PO, None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10_000,
                        help="samples per cell for the closed-form intervals")
    parser.add_argument("--boot-reps", type=int, default=2_000,
                        help="samples per cell for the bootstrap intervals")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 70, 300])
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"95% intervals, share covering the truth; goal 93-97%, none below 90%. Exact: "
          f"summed over every outcome. Simulated: ± its Monte-Carlo standard error over "
          f"{args.reps} samples ({args.boot_reps} for a bootstrap of {args.n_boot} "
          "resamples)")
    print(f"{'interval':34s}" + "".join(f"{'n=' + str(n):>14s}" for n in args.sizes))
    shares: list[float] = []
    outside: list[str] = []
    for name, coverage in exact().items():
        cells = [coverage(n) for n in args.sizes]
        shares += cells
        outside += [f"{name} n={n}" for n, c in zip(args.sizes, cells, strict=True)
                    if not 0.93 <= c <= 0.97]
        print(f"{name:34s}" + "".join(f"{c:8.1%} exact" for c in cells))
    for name, (truth, draw, boot) in simulated().items():
        reps = args.boot_reps if boot else args.reps
        cells = []
        for n in args.sizes:
            rng = np.random.default_rng([n, len(name)])
            share = sum(covers(draw(rng, n, args.n_boot, rep), truth)
                        for rep in range(reps)) / reps
            se = np.sqrt(share * (1 - share) / reps)
            if name != UNUSED_ECE:
                shares.append(share)
                if not 0.93 <= share <= 0.97:
                    noise = 0.93 - 2 * se <= share <= 0.97 + 2 * se
                    outside.append(f"{name} n={n}" + (" (within 2 MC errors)" if noise
                                                      else ""))
            cells.append(f"{share:8.1%} ±{se:4.1%}")
        print(f"{name:34s}" + "".join(cells) + f"  ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    print(f"lowest coverage of an interval evalkit gives: {min(shares):.1%}; outside "
          f"93-97%: {', '.join(outside) or 'none'}")
    # the bootstrap's own Monte-Carlo error: the bounds of one sample over seeds, beside
    # the error each row reports (details.mc_error)
    x = np.random.default_rng(0).lognormal(0, SIGMA, 70)
    found = [mean_ci(x, args.n_boot, seed) for seed in range(50)]
    bounds = np.array([f[:2] for f in found])
    reported = np.mean([f.mc_error for f in found])
    print(f"bootstrap bounds over 50 seeds (mean latency, n=70, {args.n_boot} resamples): "
          f"sd {bounds[:, 0].std(ddof=1):.4f} (low), {bounds[:, 1].std(ddof=1):.4f} (high); "
          f"details.mc_error reports {reported:.4f} on average (the larger bound's)")
    print(f"took {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
