"""How wide an interval a labelling budget will give, before any label exists."""

from __future__ import annotations

import math

from evalkit.estimation._estimate import z_value

__all__ = ["expected_half_widths"]


def expected_half_widths(budget: int, population: int, rate: float, confidence: float = 0.95,
                         correlations: tuple[float, ...] = (0.0, 0.5, 0.8)
                         ) -> dict[float, float]:
    """The expected half-width of the corrected interval of a rate near ``rate`` from
    ``budget`` labels drawn at random among ``population`` records, for each judge–human
    correlation in ``correlations`` (0: human labels alone). PPI++'s variance at its best
    lambda is ``p(1-p)(1 - rho^2 N/(N+n)) / n``, N the records left unlabelled."""
    p = min(max(rate, 0.05), 0.95)  # a rate near 0 or 1 is no guide to the truth's spread
    n, big_n = max(budget, 1), max(population - budget, 1)
    z = z_value(confidence)
    out = {}
    for rho in correlations:
        var = p * (1 - p) * (1 - rho * rho * big_n / (big_n + n)) / n
        out[rho] = z * math.sqrt(var)
    return out
