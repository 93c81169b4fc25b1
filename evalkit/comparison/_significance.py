"""The tests behind a verdict: McNemar's exact test for paired binary outcomes, the paired
bootstrap's p-value with its Monte-Carlo error, and the smallest change each could detect.

McNemar's exact test looks only at the discordant pairs (records that flipped): under no
change, each flip is as likely to go one way as the other, so the count that went one way
is Binomial(flips, 1/2). Its two-sided p-value equals
``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)`` and
``scipy.stats.binomtest(b, b + c, 0.5)`` (the test oracles; neither is needed at run time)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from evalkit.metrics._stats import share_mc_error

POWER = 0.8
"""The power at which the smallest detectable change is stated: a true change of that size
would be found 80% of the time."""


EXACT_UP_TO = 20_000
"""Above this many flipped records, the binomial tail comes from the normal approximation
with continuity correction (its error there is below 1e-4 of the p-value's scale) instead of
summing exact terms."""


def _binomial_tail(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= EXACT_UP_TO:
        from fractions import Fraction

        return float(Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n))
    return NormalDist(n / 2, math.sqrt(n) / 2).cdf(k + 0.5)


def mcnemar_exact(worse: int, better: int, alternative: str = "two-sided") -> float:
    """The exact McNemar p-value of ``worse`` records flipping one way and ``better`` the
    other. ``alternative``: ``two-sided``, or ``greater`` (more flips to ``worse`` than
    chance: a one-sided test of a regression). 1.0 with no flip."""
    n = worse + better
    if n == 0:
        return 1.0
    if alternative == "greater":
        return _binomial_tail(better, n)  # P(X ≥ worse) = P(X ≤ n − worse), by symmetry
    return min(1.0, 2.0 * _binomial_tail(min(worse, better), n))


@dataclass(frozen=True)
class BootstrapTest:
    """The paired bootstrap's answer for one row: two-sided p-value of "no change", its
    Monte-Carlo standard error (it shrinks as 1/√resamples), and the resamples' spread."""

    p_value: float
    mc_error: float
    se: float


def bootstrap_test(deltas: np.ndarray, shift: float = 0.0,
                   alternative: str = "two-sided") -> BootstrapTest:
    """The percentile-bootstrap p-value of "the change is ``shift``" from resampled changes
    ``deltas``: the share of resamples on the far side of ``shift`` (ties count half);
    two-sided doubles the smaller tail. It is the dual of the percentile interval: the
    (1 − alpha) interval excludes ``shift`` exactly when the two-sided p-value is below
    alpha. ``alternative='greater'``: the one-sided p-value of "the change is at most
    ``shift``" (evidence it is larger). The Monte-Carlo error is the tail share's standard
    error, taken at no less than one resample in ``len(deltas)`` so that a p-value of 0
    from few resamples is not mistaken for a settled one."""
    b = len(deltas)
    below = float(np.count_nonzero(deltas < shift))
    tied = float(np.count_nonzero(deltas == shift))
    above = b - below - tied
    low_tail = (below + tied / 2) / max(b, 1)
    high_tail = (above + tied / 2) / max(b, 1)
    if alternative == "greater":
        q, factor = low_tail, 1
    else:
        q, factor = min(low_tail, high_tail), 2
    p = min(1.0, factor * q)
    mc = factor * share_mc_error(q, b)
    return BootstrapTest(p, mc, float(np.std(deltas, ddof=1)) if b > 1 else math.nan)


def records_floor(n: int, alternative: str = "two-sided") -> float:
    """The smallest p-value a distribution-free paired test of ``n`` records can give:
    Fisher's randomization test, exact over the 2ⁿ ways to swap A and B within records,
    reaches 2·2⁻ⁿ two-sided (2⁻ⁿ one-sided, ``greater``) when every record moved the same
    way (``scipy.stats.permutation_test(..., permutation_type="samples")``). The paired
    bootstrap has no such floor: every resample of records that all moved one way moves
    that way, and its p-value was 0 from a single record."""
    return min(1.0, (1.0 if alternative == "greater" else 2.0) * 0.5 ** max(n, 0))


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def mde_normal(se: float, alpha: float, power: float = POWER) -> float:
    """The smallest change a two-sided test at ``alpha`` finds with ``power``, for an
    estimate with standard error ``se``: (z₁₋α/₂ + z_power) · se."""
    return (_z(1 - alpha / 2) + _z(power)) * se


def mde_mcnemar(n_pairs: int, discordant: int, alpha: float, power: float = POWER) -> float:
    """The smallest change in a paired rate that McNemar's test at ``alpha`` finds with
    ``power`` over ``n_pairs`` records, ``discordant`` of which flipped: the normal
    approximation (z₁₋α/₂ + z_power)·√(p_d / n) with p_d the flip rate, but never below the
    change the exact test needs at the least (every one of k flips the same way, with
    2·2⁻ᵏ ≤ alpha: 6 records of n at alpha 0.05)."""
    if n_pairs <= 0:
        return math.nan
    k_min = math.ceil(math.log2(2 / alpha))
    rate = discordant / n_pairs
    normal = (_z(1 - alpha / 2) + _z(power)) * math.sqrt(rate / n_pairs)
    return min(1.0, max(normal, k_min / n_pairs))
