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
    """The two-sided Student t quantile of ``confidence`` with ``df`` degrees of freedom
    (:func:`~evalkit.metrics._intervals.t_quantile`: exact, so no scipy at run time);
    infinite at no degree of freedom."""
    from evalkit.metrics._intervals import t_quantile

    if df <= 0:
        return float("inf")
    return t_quantile(0.5 + confidence / 2, df)
