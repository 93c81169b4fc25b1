"""Statistics over paired scores (two judges, or a judge and human labels).

Each statistic is written once, vectorised over rows: it takes arrays of shape
``(resamples, n)`` and returns one value per row, NaN where undefined. The point estimate is
the same function on a single row, and :func:`value` turns its NaN into the reason the
statistic is undefined (constant scores, no pairs), so a metric row can say why instead of
holding NaN. Binary inputs are 0/1 floats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from evalkit.metrics._intervals import canonical, wilson_ci
from evalkit.metrics._stats import (
    bootstrap_bounds,
    exponent,
    index_bootstrap,
    resample_indices,
)

Result = tuple[float | None, str | None]
Batch = Callable[..., np.ndarray]


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def constant_rows(x: np.ndarray) -> np.ndarray:
    """Per row, whether every value equals the first: an exact test, where a variance
    computed from ``x - mean`` is floating-point noise (a constant 0.1 gave 1e-34, and
    Pearson's r of noise came out as 0 [0, 0])."""
    return np.all(x == x[:, :1], axis=1)


def near_one(*xs: np.ndarray) -> list[np.ndarray]:
    """``xs`` multiplied by one power of two that brings their largest magnitude into
    [1, 2) (:func:`~evalkit.metrics._stats.exponent`): exact, and a scale-free statistic
    keeps its bits, while its sums of squares can no longer overflow or underflow (Pearson's
    r of scores of 1e-200 or 1e200 was "undefined", scipy's is the r of the same scores
    near 1)."""
    e = exponent(np.concatenate([x.ravel() for x in xs]))
    return [np.ldexp(x, -e) for x in xs]


def pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r per row; NaN where either side is constant (scipy: undefined, with a
    ``ConstantInputWarning``). Each side is scaled on its own (:func:`near_one`): r does not
    depend on either side's unit."""
    (a,), (b,) = near_one(a), near_one(b)
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    out = np.clip(_div((da * db).sum(axis=1), den), -1.0, 1.0)
    out[constant_rows(a) | constant_rows(b)] = np.nan
    return out


def codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's index among the sorted distinct values, and how many there are: what
    :func:`spearman_codes` ranks from."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(values.shape), len(distinct)


def ranks_from_codes(c: np.ndarray, k: int) -> np.ndarray:
    """Per row, the tie-averaged rank of each code: (values below) + (ties + 1) / 2. Counting
    instead of sorting keeps the bootstrap linear in n."""
    rows = c.shape[0]
    flat = (c + np.arange(rows)[:, None] * k).ravel()
    counts = np.bincount(flat, minlength=rows * k).reshape(rows, k)
    below = np.cumsum(counts, axis=1) - counts
    return np.take_along_axis(below + (counts + 1) / 2.0, c, axis=1)


def spearman_codes(ca: np.ndarray, cb: np.ndarray, ka: int, kb: int) -> np.ndarray:
    """Spearman's rho per row from value codes (see :func:`codes`)."""
    return pearson(ranks_from_codes(ca, ka), ranks_from_codes(cb, kb))


def percent_agreement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Share of pairs with the same value, per row."""
    return (x == y).mean(axis=1)


def cohen_kappa(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cohen's kappa of two binary ratings, per row, from whole-number counts: with n pairs,
    A agreeing, X and Y ones, kappa = (n·A − E) / (n² − E) where E = X·Y + (n−X)(n−Y), so a
    kappa of 0 is exactly 0 (from proportions it came out as 8.86e-17)."""
    n = x.shape[1]
    agree = (x == y).sum(axis=1).astype(float)
    ones_x, ones_y = x.sum(axis=1), y.sum(axis=1)
    expected = ones_x * ones_y + (n - ones_x) * (n - ones_y)
    return _div(n * agree - expected, float(n * n) - expected)


def alpha_interval(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha, interval metric, for two raters with no missing values.

    With ``n = 2N`` pooled values the coincidence-matrix form reduces to
    alpha = 1 − (n − 1)·Σ_i 2(a_i − b_i)² / Σ_{v,w} (v − w)², and
    Σ_{v,w} (v − w)² = 2n·Σ_v (v − mean)² (Krippendorff 2011). Both raters are scaled by
    one power of two (:func:`near_one`: alpha is a ratio of sums of squares)."""
    a, b = near_one(a, b)
    pooled = np.concatenate([a, b], axis=1)
    n = pooled.shape[1]
    observed = 2.0 * ((a - b) ** 2).sum(axis=1)
    expected = 2.0 * n * ((pooled - pooled.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    return 1.0 - _div((n - 1) * observed, expected)


def alpha_nominal(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha, nominal metric, for two raters giving binary values: as
    :func:`alpha_interval` with δ = [v ≠ w], where Σ_{v,w} δ = n² − n₀² − n₁²."""
    n = 2 * x.shape[1]
    observed = 2.0 * (x != y).sum(axis=1)
    ones = x.sum(axis=1) + y.sum(axis=1)
    expected = float(n * n) - ones ** 2 - (n - ones) ** 2
    return 1.0 - _div((n - 1) * observed, expected)


def _counts(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, ...]:
    tp = ((pred == 1) & (truth == 1)).sum(axis=1).astype(float)
    fp = ((pred == 1) & (truth == 0)).sum(axis=1).astype(float)
    fn = ((pred == 0) & (truth == 1)).sum(axis=1).astype(float)
    return tp, fp, fn


def precision(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """tp / (tp + fp) per row; NaN when nothing was predicted positive (scikit-learn
    returns 0 there, with a warning; a 0 would read as a measured failure)."""
    tp, fp, _ = _counts(pred, truth)
    return _div(tp, tp + fp)


def recall(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """tp / (tp + fn) per row; NaN when the truth has no positive."""
    tp, _, fn = _counts(pred, truth)
    return _div(tp, tp + fn)


def f1(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """F1 per row as scikit-learn computes it, 2·tp / (2·tp + fp + fn): 0 when there is a
    positive on either side and no true positive (tp 0, fp 0, fn 11 gives 0, though
    precision is undefined there); NaN only when neither side has a positive (sklearn's
    ``zero_division``)."""
    tp, fp, fn = _counts(pred, truth)
    return _div(2 * tp, 2 * tp + fp + fn)


PROPORTIONS = ("accuracy", "percent_agreement", "precision", "recall")
"""The statistics that are a count of successes out of a count of trials: their interval is
Wilson's (:func:`proportion_ci`), not the bootstrap's, which collapses to a point at 0 and 1
(precision 58/58 gave [1, 1]; Wilson: [0.938, 1])."""


def proportion_ci(stat: str, pred: np.ndarray, truth: np.ndarray, confidence: float,
                  ) -> tuple[float | None, float | None]:
    """Wilson's interval of proportion ``stat`` (one of :data:`PROPORTIONS`) of the 1-D
    binary ``pred`` and ``truth``; ``(None, None)`` where its denominator is 0."""
    c = confusion(pred, truth)
    hits, trials = {"accuracy": (c["tp"] + c["tn"], len(pred)),
                    "percent_agreement": (c["tp"] + c["tn"], len(pred)),
                    "precision": (c["tp"], c["tp"] + c["fp"]),
                    "recall": (c["tp"], c["tp"] + c["fn"])}[stat]
    return wilson_ci(hits, trials, confidence) if trials else (None, None)


LINEAR_IN_AGREEMENT = ("kappa", "alpha_nominal")
"""The binary agreement statistics that, with each rater's share of ones held at its
observed value, are a straight line in the share of pairs that agree, p_o: Cohen's kappa
(p_o − p_e)/(1 − p_e), with p_e = p_a·p_b + (1 − p_a)(1 − p_b) (Cohen 1960 derived his
standard error the same way), and Krippendorff's nominal alpha
1 − (1 − p_o)·m(m − 1)/(m² − m₀² − m₁²) over the m = 2n pooled values. Their interval is
Wilson's interval of p_o carried along that line (:func:`agreement_ci`): at 20 records the
percentile bootstrap of kappa covered 93% at moderate agreement, 84% at a 15% prevalence
and 64% where the raters agree on 95% (a sample that agrees on every pair resamples to
[1, 1]); Wilson's line covers 96%, 96% and 92% there (bench/bench_coverage.py)."""

CLOSED_FORM = PROPORTIONS + LINEAR_IN_AGREEMENT
"""The statistics whose interval is Wilson's (:func:`closed_form_ci`), not the bootstrap's."""


def agreement_ci(stat: str, x: np.ndarray, y: np.ndarray, confidence: float,
                 ) -> tuple[float | None, float | None]:
    """The interval of ``stat`` (one of :data:`LINEAR_IN_AGREEMENT`) of the 1-D binary
    ratings ``x`` and ``y``: Wilson's interval of the share that agree, through the
    statistic's line at the observed margins; kappa's bounds kept within [−1, 1].
    ``(None, None)`` with no pair, or where the margins leave the statistic undefined."""
    n = len(x)
    if not n:
        return None, None
    lo, hi = wilson_ci(int(np.sum(x == y)), n, confidence)
    if stat == "kappa":
        pa_, pb = float(np.mean(x)), float(np.mean(y))
        pe = pa_ * pb + (1 - pa_) * (1 - pb)
        if pe >= 1.0:
            return None, None
        return max(-1.0, (lo - pe) / (1 - pe)), min(1.0, (hi - pe) / (1 - pe))
    m = 2 * n
    ones = float(np.sum(x) + np.sum(y))
    expected = m * m - ones ** 2 - (m - ones) ** 2
    if expected <= 0:
        return None, None
    slope = m * (m - 1) / expected
    return 1.0 - (1.0 - lo) * slope, 1.0 - (1.0 - hi) * slope


def closed_form_ci(stat: str, x: np.ndarray, y: np.ndarray, confidence: float,
                   ) -> tuple[float | None, float | None]:
    """The Wilson-based interval of a statistic of :data:`CLOSED_FORM`."""
    if stat in LINEAR_IN_AGREEMENT:
        return agreement_ci(stat, x, y, confidence)
    return proportion_ci(stat, x, y, confidence)


def intervals(cols: list[np.ndarray], fns: dict[str, Batch], x: np.ndarray, y: np.ndarray,
              n_boot: int, seed: int, confidence: float,
              ) -> dict[str, tuple[float | None, float | None]]:
    """The interval of each statistic in ``fns`` (those that have a value): Wilson-based
    (:func:`closed_form_ci`, on the binary ratings ``x`` and ``y``) for one of
    :data:`CLOSED_FORM`, else the bootstrap's (:func:`bootstrap`, ``fns`` over resamples of
    ``cols``); none with ``n_boot`` = 0."""
    cis = bootstrap(cols, {s: fn for s, fn in fns.items() if s not in CLOSED_FORM}, n_boot,
                    seed, confidence)
    # every resample gave the same value (F1 of a judge right on every record: [1, 1]): an
    # interval of no width covers that value alone. Left open, with NO_WIDTH as the reason;
    # r = ±1 keeps its point, as scipy.stats.pearsonr's interval does there
    cis.update({s: NoWidth() for s, ci in cis.items() if ci[0] is not None
                and ci[0] == ci[1] and s not in ("pearson", "spearman")})
    if n_boot > 0:
        cis.update({s: closed_form_ci(s, x, y, confidence) for s in fns if s in CLOSED_FORM})
    return cis


NO_WIDTH = ("every resample gave the same value: an interval of no width would cover that "
            "value alone, so none is given")


def records_interval(fn: Callable[[np.ndarray], float], n: int, value: float | None,
                     n_boot: int, seed: int, confidence: float,
                     method: str = "bootstrap (records)", no_width: str = NO_WIDTH
                     ) -> tuple[tuple[Any, Any], dict[str, str]]:
    """The bootstrap interval, over ``n`` records, of a statistic ``fn(indices)`` of value
    ``value``, with how it was drawn (``{"ci_method": method}``), or why there is none
    (``ci_open``: one record, undefined on every resample, or the same value on every one,
    ``no_width``); neither when ``n_boot`` is 0 or there is no value."""
    if value is None or np.isnan(value) or not n_boot:
        return (None, None), {}
    if n < 2:
        return (None, None), {"ci_open": "one record: nothing to resample records from"}
    ci = index_bootstrap(fn, n, n_boot, seed, confidence)
    if ci[0] is None and ci[1] is None:
        return ci, {"ci_open": "the statistic is undefined on every resample"}
    if ci[0] == ci[1]:
        return (None, None), {"ci_open": no_width}
    return ci, {"ci_method": method}


class NoWidth(tuple):
    """``(None, None)``: a bootstrap whose every resample gave the same value (the reason is
    :data:`NO_WIDTH`)."""

    def __new__(cls) -> NoWidth:
        return super().__new__(cls, (None, None))


def interval_details(stat: str, ci: tuple[float | None, float | None],
                     value: float | None, n: int, n_boot: int) -> dict[str, str]:
    """``{"ci_method": how}`` of ``stat``'s interval ``ci`` over ``n`` pairs, or
    ``{"ci_open": why}`` for a value left without one though one was asked for
    (``n_boot`` > 0: one pair cannot be resampled; beyond that every resample left the
    statistic undefined, or gave it the same value, :class:`NoWidth`); else ``{}``."""
    if ci[0] is not None:
        return {"ci_method": "wilson (agreement, margins fixed)"
                if stat in LINEAR_IN_AGREEMENT else
                "wilson" if stat in PROPORTIONS else "bootstrap"}
    if value is None or ci[1] is not None or n_boot <= 0:
        return {}
    if n < 2:
        return {"ci_open": f"{n} pair(s): too few to resample for an interval"}
    return {"ci_open": NO_WIDTH if isinstance(ci, NoWidth) else
            "the statistic is undefined on too many resamples for an interval"}


def confusion(pred: np.ndarray, truth: np.ndarray) -> dict[str, int]:
    """Binary confusion counts of one row (positive = 1)."""
    return {"tp": int(np.sum((pred == 1) & (truth == 1))),
            "fp": int(np.sum((pred == 1) & (truth == 0))),
            "fn": int(np.sum((pred == 0) & (truth == 1))),
            "tn": int(np.sum((pred == 0) & (truth == 0)))}


def _constant(x: np.ndarray) -> float | None:
    return float(x[0]) if len(x) and np.all(x == x[0]) else None


def why_undefined(stat: str, a: np.ndarray, b: np.ndarray) -> str:
    """Why ``stat`` is undefined on the single-row inputs ``a`` and ``b``."""
    if not len(a):
        return "no pairs"
    if stat in ("pearson", "spearman") and len(a) < 2:
        return f"needs at least 2 pairs, got {len(a)}"
    ca, cb = _constant(a), _constant(b)
    if stat == "precision":
        return "precision undefined: the judge flagged no record"
    if stat == "recall":
        return "recall undefined: no record is positive in the truth"
    if stat == "f1":
        return "f1 undefined: neither the judge nor the truth flags any record"
    if ca is not None and cb is not None:
        return (f"{stat} undefined: both raters are constant (a = {ca:g}, b = {cb:g} on "
                "every pair)")
    if ca is not None or cb is not None:
        who, val = ("a", ca) if ca is not None else ("b", cb)
        return f"{stat} undefined: {who} is constant ({val:g} on every pair)"
    return f"{stat} undefined on these values"


def value(stat: str, fn: Batch, *cols: np.ndarray) -> Result:
    """The point estimate of ``fn`` on 1-D ``cols``, or ``(None, why)``."""
    if not len(cols[0]):
        return None, "no pairs"
    v = float(fn(*(c[None, :] for c in cols))[0])
    if np.isnan(v):
        return None, why_undefined(stat, cols[0], cols[1])
    return v, None


def bootstrap(cols: list[np.ndarray], stats: dict[str, Batch], n_boot: int = 1000,
              seed: int = 0, confidence: float = 0.95, method: str = "linear",
              ) -> dict[str, tuple[float | None, float | None]]:
    """Expanded percentile bootstrap intervals (:func:`evalkit.metrics._stats.
    bootstrap_bounds`: Hesterberg 2015, with the Monte-Carlo error of their bounds) of
    several row-vectorised statistics over the same resamples of the pairs (``cols``
    resampled together). Resamples on which a statistic is
    undefined are left out of its interval. Resamples are drawn by
    :func:`evalkit.metrics._stats.resample_indices`, as for every other interval, in blocks
    of at most 2M indices: each block is materialised once per column. ``method`` is numpy's
    quantile method (``inverted_cdf`` keeps an infinite resample from turning a bound into
    NaN). The rows are drawn in their canonical order (:func:`canonical`), so the interval
    depends on the pairs, not on the order the records came in."""
    n = len(cols[0])
    if n < 2 or n_boot <= 0 or not stats:
        return {k: (None, None) for k in stats}
    cols = canonical(cols)
    results: dict[str, list[np.ndarray]] = {k: [] for k in stats}
    for part in resample_indices(n, n_boot, seed, cells=2_000_000):
        sampled = [c[part] for c in cols]
        for k, fn in stats.items():
            results[k].append(fn(*sampled))
    return {k: bootstrap_bounds(np.concatenate(parts), n, confidence, method)
            for k, parts in results.items()}
