"""Confidence intervals chosen for coverage, one per kind of quantity (docs/trust.md#intervals
names each method and its reference):

- a proportion (k of n): Wilson's score interval (:func:`wilson_ci`);
- a proportion pooled over clusters (citations within records): Wilson's interval at the
  effective sample size of the ratio estimator (:func:`clustered_proportion_ci`);
- a percentile: the distribution-free interval between order statistics, with an open
  bound where too few values lie beyond it (:func:`quantile_interval`);
- anything else: the percentile bootstrap, drawn over the data in a canonical order
  (:func:`canonical`), so the interval is a function of the data and not of the order the
  records came in (shards merged, input shuffled, a run resumed).

numpy only: scipy and statsmodels are the tests' oracles, not dependencies."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``successes / n`` (``n`` ≥ 1; Wilson 1927;
    Brown, Cai & DasGupta 2001 recommend it over the Wald and exact intervals): it stays
    inside [0, 1] and keeps a width at 0 and at n successes (0 of 3 at 95%: [0, 0.562]).
    Equal to ``statsmodels.stats.proportion.proportion_confint(method="wilson")``."""
    return _wilson(successes / n, n, confidence)


def _wilson(p: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson's interval of an observed proportion ``p`` at sample size ``n`` (which may be
    an effective, non-integer size)."""
    z = _z(confidence)
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * float(np.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n))) / denom
    lo = 0.0 if p <= 0.0 else max(0.0, center - half)
    hi = 1.0 if p >= 1.0 else min(1.0, center + half)
    return lo, hi


def clustered_proportion_ci(num: np.ndarray, den: np.ndarray, confidence: float = 0.95,
                            ) -> tuple[float, float] | tuple[None, None]:
    """Interval of the pooled proportion ``sum(num) / sum(den)`` where each record (a
    cluster) contributes ``num[i]`` successes out of ``den[i]`` trials (supported citations
    out of a record's citations): Wilson's interval at the effective sample size
    ``p(1 − p) / var(p)``, with the ratio estimator's linearised variance, never more than
    the number of trials (Korn & Graubard 1998). At p = 0 or 1 no design effect can be
    estimated and the effective size is the number of trials: the interval keeps a width
    there, where a bootstrap over records collapses to a point."""
    total = float(np.sum(den))
    if total <= 0:
        return None, None
    p = float(np.sum(num)) / total
    n_eff = total
    m = len(den)
    if 0.0 < p < 1.0 and m >= 2:
        mean_den = total / m
        resid = np.asarray(num, dtype=float) - p * np.asarray(den, dtype=float)
        var = float(np.sum(resid * resid)) / (m * (m - 1)) / (mean_den * mean_den)
        if var > 0:
            n_eff = min(total, p * (1 - p) / var)
    return _wilson(p, n_eff, confidence)


def _binom_cdf(n: int, q: float) -> np.ndarray:
    """``P(Bin(n, q) ≤ j)`` for j = 0 … n, from the pmf's log-recurrence (no scipy)."""
    if q <= 0.0:
        return np.ones(n + 1)
    if q >= 1.0:
        out = np.zeros(n + 1)
        out[n] = 1.0
        return out
    j = np.arange(n, dtype=float)
    steps = np.log(n - j) - np.log(j + 1) + np.log(q) - np.log1p(-q)
    log_pmf = n * np.log1p(-q) + np.concatenate([[0.0], np.cumsum(steps)])
    pmf = np.exp(log_pmf - log_pmf.max())
    pmf /= pmf.sum()
    return np.minimum(np.cumsum(pmf), 1.0)


def quantile_interval(ordered: np.ndarray, q: float, confidence: float = 0.95,
                      ) -> tuple[float | None, float | None, str | None]:
    """Distribution-free interval of the population ``q`` quantile from the sorted values
    ``ordered`` (x₁ ≤ … ≤ xₙ): ``(low, high, why a bound is open)``.

    The chance that the quantile lies below xₗ is ``B(l − 1)``, and at or above xᵤ is
    ``1 − B(u − 1)``, with B the Binomial(n, q) distribution function, whatever the
    distribution of the values (Thompson 1936; David & Nagaraja, Order Statistics, §7.1).
    Each bound takes α/2 = (1 − confidence)/2 of that chance: the lower bound is the order
    statistic whose tail is the largest not above α/2, moved toward the next one by linear
    interpolation of the tail probabilities so the level is met without the binomial's
    discreteness making it conservative (in the manner of Hettmansperger & Sheather 1986).
    Where even x₁ (or xₙ) leaves more than α/2 beyond it, that bound is open (None: nothing
    in the data bounds it) and the other bound takes the whole α, so the interval is still
    one-sided at ``confidence``. Both open: ``(None, None, why)``."""
    n = len(ordered)
    if n == 0:
        return None, None, "no values"
    alpha = 1.0 - confidence
    cdf = _binom_cdf(n, q)
    lower_tail = cdf[:n]            # lower_tail[l - 1] = P(quantile < x_l)
    upper_tail = 1.0 - cdf[:n]      # upper_tail[u - 1] = P(quantile ≥ x_u)
    lower_open = lower_tail[0] > alpha / 2
    upper_open = upper_tail[n - 1] > alpha / 2
    why = None
    if lower_open and upper_open:
        return None, None, (f"{n} value(s) are too few for a {confidence:.0%} interval of "
                            f"the {q:g} quantile: no order statistic bounds it on either "
                            "side")
    lo = hi = None
    if not lower_open:
        lo = _bound(ordered, lower_tail, alpha if upper_open else alpha / 2, lower=True)
    else:
        why = (f"lower bound open: with {n} values the {q:g} quantile lies below the "
               f"smallest with probability {lower_tail[0]:.3g} > {alpha / 2:g}")
    if not upper_open:
        hi = _bound(ordered, upper_tail, alpha if lower_open else alpha / 2, lower=False)
    else:
        why = (f"upper bound open: with {n} values the {q:g} quantile lies above the "
               f"largest with probability {upper_tail[n - 1]:.3g} > {alpha / 2:g}")
    return lo, hi, why


def _bound(ordered: np.ndarray, tail: np.ndarray, level: float, lower: bool) -> float:
    """The bound whose tail probability is ``level``: the order statistic with the tail
    nearest below it, interpolated toward its neighbour (whose tail is above it)."""
    n = len(ordered)
    if lower:  # tails rise with the rank: the last rank whose tail is ≤ level
        k = int(np.searchsorted(tail, level, side="right")) - 1
        nxt = k + 1
    else:  # tails fall with the rank: the first rank whose tail is ≤ level
        k = int(np.searchsorted(-tail, -level, side="left"))
        nxt = k - 1
    if not 0 <= nxt < n or tail[nxt] == tail[k]:
        return float(ordered[k])
    lam = (level - tail[k]) / (tail[nxt] - tail[k])
    return float(ordered[k] + lam * (ordered[nxt] - ordered[k]))


def canonical(cols: list[np.ndarray]) -> list[np.ndarray]:
    """``cols`` (equal-length 1-D arrays, one value per record) with their rows in a
    canonical order: sorted ascending by the first column, ties by the second, and so on
    (NaN last). A bootstrap drawn over this order depends only on the multiset of rows, so
    the same records give the same interval however they were ordered, sharded or resumed."""
    if len(cols[0]) < 2:
        return cols
    order = np.lexsort(tuple(np.asarray(c, dtype=float) for c in reversed(cols)))
    return [c[order] for c in cols]
