"""Prediction-powered inference for a mean (PPI++: Angelopoulos, Duchi and Zrnic 2023,
arXiv:2311.01453; PPI: Angelopoulos et al., Science 2023), for labels drawn as a simple
random sample. With ``n`` labelled records (human value ``y``, judge value ``f``) and the
``N`` others (judge value ``f_u``)::

    theta = lam * mean(f_u) + mean(y - lam * f)
    se^2  = var(lam * f_u) / N + var(y - lam * f) / n        (variances with ddof 0)
    lam   = cov(y, f) / ((1 + n / N) * var(f, f_u)), clipped to [0, 1]

which is ``ppi_py.ppi_mean_pointestimate`` / ``ppi_mean_ci`` to rounding (a test holds it to
1e-9). ``lam = 0`` is the human-only mean; ``lam = 1`` is plain PPI."""

from __future__ import annotations

import numpy as np

from evalkit.estimation._estimate import Estimate, z_value

__all__ = ["census_mean", "ppi_lambda", "ppi_mean", "ppi_paired_difference"]


def ppi_lambda(y: np.ndarray, f: np.ndarray, f_u: np.ndarray) -> float:
    """The power-tuning parameter that minimises the PPI++ variance, clipped to [0, 1]
    (0 when the judge's values do not vary: the judge then carries no information)."""
    n, big_n = len(y), len(f_u)
    var_f = float(np.var(np.concatenate([f, f_u]), ddof=1))
    if not var_f > 0:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    return float(np.clip(cov / ((1 + n / big_n) * var_f), 0.0, 1.0))


def ppi_mean(y: np.ndarray, f: np.ndarray, f_u: np.ndarray, confidence: float = 0.95,
             lam: float | None = None) -> Estimate:
    """The PPI++ estimate of the mean of ``y`` over labelled and unlabelled records, with its
    normal interval. ``details``: n labelled, N unlabelled, ``lambda``, the judge–human
    correlation on the labelled records and the effective sample size (the number of human
    labels alone that would give the same variance)."""
    y, f, f_u = (np.asarray(a, dtype=float) for a in (y, f, f_u))
    n, big_n = len(y), len(f_u)
    details = {"n_labelled": n, "n_unlabelled": big_n}
    if n < 2:
        return Estimate.refused("ppi++", f"{n} labelled record(s): PPI++ needs at least 2",
                                **details)
    if big_n == 0:
        return census_mean(y, "ppi++")
    if lam is None:
        lam = ppi_lambda(y, f, f_u)
    if not np.var(y - lam * f) > 0:
        # (ppi_py would give an interval of no width: a few labels that all agree are no
        # evidence that the truth is exactly their value)
        return Estimate.refused("ppi++", f"the {n} labels leave no spread to estimate the "
                                "judge's error from (all alike): the interval would have no "
                                "width; label more records", **details)
    value = float(lam * f_u.mean() + (y - lam * f).mean())
    var = float(np.var(lam * f_u)) / big_n + float(np.var(y - lam * f)) / n
    half = z_value(confidence) * float(np.sqrt(var))
    details.update({"lambda": lam, "correlation": _correlation(y, f),
                    "effective_n": _effective_n(y, var, n)})
    return Estimate("ppi++", value, value - half, value + half, details)


def census_mean(y: np.ndarray, method: str) -> Estimate:
    """Every record labelled: the mean is known exactly (its interval is the point)."""
    value = float(np.mean(y))
    return Estimate(method, value, value, value,
                    {"n_labelled": len(y), "n_unlabelled": 0, "census": True})


def _correlation(y: np.ndarray, f: np.ndarray) -> float | None:
    if len(y) < 2 or not np.std(y) > 0 or not np.std(f) > 0:
        return None
    return float(np.corrcoef(y, f)[0, 1])


def _effective_n(y: np.ndarray, var: float, n: int) -> float | None:
    """Labels that a human-only mean would need for the same variance: var(y) / var."""
    if not var > 0:
        return None
    return float(np.var(y) / var) if np.var(y) > 0 else float(n)


def ppi_paired_difference(y_a: np.ndarray, y_b: np.ndarray, f_a: np.ndarray, f_b: np.ndarray,
                          labelled: np.ndarray, confidence: float = 0.95) -> Estimate:
    """PPI++ of the change B − A in the mean human value over records both runs hold: the
    per-record differences ``y_b − y_a`` (human, known where ``labelled``) and ``f_b − f_a``
    (the judges, on every record) are one PPI++ problem, so the pairing's covariance is
    inside the interval."""
    labelled = np.asarray(labelled, dtype=bool)
    d_y = (np.asarray(y_b, dtype=float) - np.asarray(y_a, dtype=float))[labelled]
    d_f = np.asarray(f_b, dtype=float) - np.asarray(f_a, dtype=float)
    est = ppi_mean(d_y, d_f[labelled], d_f[~labelled], confidence)
    est.details["paired"] = True
    return est
