"""The value every estimator returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Estimate:
    """A point estimate with its interval; ``undefined`` says why the value is null."""

    method: str  # ppi++, ipw, rogan_gladen, human, judge, census
    value: float | None = None
    low: float | None = None
    high: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    undefined: str | None = None

    @classmethod
    def refused(cls, method: str, why: str, **details: Any) -> Estimate:
        """No value, and the reason."""
        return cls(method, details=dict(details), undefined=why)

    @property
    def half_width(self) -> float | None:
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2


def z_value(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.6449 at 90%, 1.9600 at 95%)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def t_value(confidence: float, df: float) -> float:
    """The two-sided Student t quantile of ``confidence`` with ``df`` degrees of freedom, by
    the Cornish–Fisher expansion around the normal one (Abramowitz and Stegun 26.7.5; within
    0.1% of the exact value from 3 degrees of freedom up), so no scipy at run time."""
    z = z_value(confidence)
    if df <= 0:
        return float("inf")
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4
