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

import math
from collections.abc import Callable
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
    return wilson_at(p, n, _z(confidence))


def wilson_at(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval of an observed proportion ``p`` at the (effective, possibly
    non-integer) sample size ``n`` with the quantile ``z``: the normal one, or Student's t
    where the variance behind ``n`` rests on few degrees of freedom (the IPW estimate)."""
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
    """``P(Bin(n, q) ≤ j)`` for j = 0 … n, from the pmf's log-recurrence (no scipy), over
    the window of ±12 standard deviations around n·q where the mass is (0 and 1 outside:
    what is left out there is below 1e-30), with the exact ends ``(1 − q)^n`` and
    ``1 − q^n`` (what decides an open bound)."""
    if q <= 0.0:
        return np.ones(n + 1)
    if q >= 1.0:
        out = np.zeros(n + 1)
        out[n] = 1.0
        return out
    width = 12.0 * math.sqrt(n * q * (1 - q)) + 20.0
    start, stop = max(0, int(n * q - width)), min(n, int(n * q + width) + 1)
    j = np.arange(start, stop + 1, dtype=float)  # both ends included
    log_first = (math.lgamma(n + 1) - math.lgamma(start + 1) - math.lgamma(n - start + 1)
                 + start * math.log(q) + (n - start) * math.log1p(-q))
    steps = np.log(n - j[:-1]) - np.log(j[:-1] + 1) + math.log(q) - math.log1p(-q)
    pmf = np.exp(log_first + np.concatenate([[0.0], np.cumsum(steps)]))
    out = np.zeros(n + 1)
    out[start:stop + 1] = np.minimum(np.cumsum(pmf), 1.0)
    out[stop + 1:] = 1.0
    out[0] = (1.0 - q) ** n
    if n >= 1:
        out[n - 1] = 1.0 - q ** n
    out[n] = 1.0
    return out


def quantile_interval(ordered: np.ndarray, q: float, confidence: float = 0.95,
                      ) -> tuple[float | None, float | None, str | None]:
    """Distribution-free interval of the population ``q`` quantile from the sorted values
    ``ordered`` (x₁ ≤ … ≤ xₙ): ``(low, high, why a bound is open)``.

    The chance that the quantile lies below xₗ is ``B(l − 1)``, and at or above xᵤ is
    ``1 − B(u − 1)``, with B the Binomial(n, q) distribution function, whatever the
    distribution of the values (Thompson 1936; David & Nagaraja, *Order Statistics*, §7.1).
    Each bound takes α/2 = (1 − confidence)/2 of that chance, through Hutson's fractional
    order statistics (Hutson 1999): the chance at a real rank u is the beta tail
    ``1 − I_q(u, n + 1 − u)`` (``I_q(u, n + 1 − u)`` above), equal to the binomial's at whole
    ranks; u solves tail = α/2, and the bound is x₍⌊u⌋₎ + (u − ⌊u⌋)(x₍⌊u⌋₊₁₎ − x₍⌊u⌋₎).
    That meets the level where whole order statistics would overshoot it (the binomial is
    discrete: a p99 of 20 values covered 98%). Above 5,000 values the rank is interpolated
    linearly between the whole ranks' tails, which differ little there. Where even x₁ (or
    xₙ) leaves more than α/2 beyond it, that bound is open (None: nothing in the data bounds
    it) and the other bound takes the whole α, so the interval is still one-sided at
    ``confidence``. Both open:
    ``(None, None, why)``."""
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
        level = alpha if upper_open else alpha / 2
        k = int(np.searchsorted(lower_tail, level, side="right"))  # rank: tail(k) ≤ level
        rank = _rank(lambda u: 1.0 - _betainc(u, n + 1 - u, q), level, k, k + 1, n,
                     lower_tail)
        lo = _at(ordered, rank)
    else:
        why = (f"lower bound open: with {n} values the {q:g} quantile lies below the "
               f"smallest with probability {lower_tail[0]:.3g} > {alpha / 2:g}")
    if not upper_open:
        level = alpha if lower_open else alpha / 2
        k = int(np.searchsorted(-upper_tail, -level, side="left")) + 1  # rank: tail ≤ level
        rank = _rank(lambda u: -_betainc(u, n + 1 - u, q), -level, k - 1, k, n,
                     -upper_tail)
        hi = _at(ordered, rank)
    else:
        why = (f"upper bound open: with {n} values the {q:g} quantile lies above the "
               f"largest with probability {upper_tail[n - 1]:.3g} > {alpha / 2:g}")
    return lo, hi, why


_FRACTIONAL_UP_TO = 5_000
"""Above this many values neighbouring ranks differ little in tail probability: the rank is
interpolated linearly between the whole ranks' tails, without the beta function."""


def _rank(tail: Callable[[float], float], level: float, below: int, above: int, n: int,
          whole: np.ndarray) -> float:
    """The real rank u in [``below``, ``above``] (whole ranks, 1-based) where the increasing
    ``tail(u)`` reaches ``level`` (``whole[u - 1]`` is its value at whole ranks); a whole
    rank at the ends of 1 … n."""
    if below < 1:
        return float(above)
    if above > n:
        return float(below)
    if n > _FRACTIONAL_UP_TO:
        t0, t1 = whole[below - 1], whole[above - 1]
        return below + (0.0 if t1 == t0 else (level - t0) / (t1 - t0))
    lo, hi = float(below), float(above)
    for _ in range(50):  # bisection: 2^-50 of a rank
        mid = (lo + hi) / 2
        if tail(mid) <= level:
            lo = mid
        else:
            hi = mid
    return lo


def _at(ordered: np.ndarray, rank: float) -> float:
    """The fractional order statistic at 1-based ``rank``: linear between its neighbours."""
    k = int(np.floor(rank))
    frac = rank - k
    if k >= len(ordered) or frac == 0.0:
        return float(ordered[min(k, len(ordered)) - 1])
    return float(ordered[k - 1] + frac * (ordered[k] - ordered[k - 1]))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 (the continued
    fraction of Numerical Recipes §6.4, evaluated by Lentz's method); scipy's
    ``special.betainc`` is the tests' oracle."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                 + b * math.log1p(-x))
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on the other side
        return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b
    return math.exp(log_front) * _beta_fraction(a, b, x) / a


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``p`` in (0, 1)):
    Newton's method on its distribution function P(T ≤ t) = 1 − ½·I_{df/(df+t²)}(df/2, ½)
    for t ≥ 0 (:func:`_betainc`), from the Cornish–Fisher expansion around the normal
    quantile, kept inside a bracket that bisection narrows when a step would leave it;
    ``scipy.stats.t.ppf`` is the tests' oracle."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)

    def cdf(t: float) -> float:
        return 1.0 - 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))

    log_norm = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2)
                - 0.5 * math.log(df * math.pi))
    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2.0
    t = min(max(_t_expansion(p, df), lo), hi)
    for _ in range(100):
        err = cdf(t) - p
        if err > 0:
            hi = t
        else:
            lo = t
        step = err / math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        nxt = t - step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - t) <= 1e-14 * max(abs(t), 1.0) or hi - lo <= 1e-14 * hi:
            return nxt
        t = nxt
    return t


def _t_expansion(p: float, df: float) -> float:
    """Student's t quantile to a few digits: the Cornish–Fisher expansion around the normal
    one (Abramowitz and Stegun 26.7.5), within 0.1% from 3 degrees of freedom up."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def canonical(cols: list[np.ndarray]) -> list[np.ndarray]:
    """``cols`` (equal-length 1-D arrays, one value per record) with their rows in a
    canonical order: sorted ascending by the first column, ties by the second, and so on
    (NaN last). A bootstrap drawn over this order depends only on the multiset of rows, so
    the same records give the same interval however they were ordered, sharded or resumed."""
    if len(cols[0]) < 2:
        return cols
    order = np.lexsort(tuple(np.asarray(c, dtype=float) for c in reversed(cols)))
    return [c[order] for c in cols]
