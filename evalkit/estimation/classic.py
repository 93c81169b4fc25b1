"""The two uncorrected estimates a corrected one is read against: the judge's own mean over
every record, and the mean of the human labels alone."""

from __future__ import annotations

import numpy as np

from evalkit.estimation._estimate import Estimate
from evalkit.metrics._stats import mean_ci, mean_ci_open, mean_of

__all__ = ["human_mean", "judge_mean"]


def judge_mean(f: np.ndarray, confidence: float = 0.95, n_boot: int = 1000,
               seed: int = 0) -> Estimate:
    """The judge's mean over every record, with evalkit's usual interval (Wilson for
    verdicts that are 0 or 1, else a seeded bootstrap). It is biased by the judge's errors:
    its interval covers the judge's rate, not the truth."""
    return _mean(np.asarray(f, dtype=float), "judge", confidence, n_boot, seed)


def human_mean(y: np.ndarray, confidence: float = 0.95, n_boot: int = 1000,
               seed: int = 0) -> Estimate:
    """The mean of the human labels alone (a simple random sample), with the same intervals
    as :func:`judge_mean`."""
    return _mean(np.asarray(y, dtype=float), "human", confidence, n_boot, seed)


def _mean(values: np.ndarray, method: str, confidence: float, n_boot: int,
          seed: int) -> Estimate:
    if not len(values):
        return Estimate.refused(method, "no values")
    low, high, how = mean_ci(values, n_boot, seed, confidence)
    # a value without an interval says why (one value, all equal), as every metric row does
    found = {"ci_method": how} if how else mean_ci_open(len(values), n_boot)
    return Estimate(method, mean_of(values), low, high, {"n": len(values), **found})
