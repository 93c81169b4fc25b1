"""Statistics shared by metrics: bootstrap confidence intervals and slicing."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit._arrow import one_array
from evalkit.metrics._intervals import canonical, quantile_interval, wilson_ci
from evalkit.results.columns import sql_literal
from evalkit.results.sandbox import quote_identifier
from evalkit.results.schemas import RECORDS

SLICEABLE = [f.name for f in RECORDS if not pa.types.is_list(f.type)]
# a metadata key path: any text but quotes, backslashes and control characters (a slice
# column becomes a JSON path and a column name in SQL: quoted, but never able to end it)
_METADATA_KEY = re.compile(r"metadata\.[^\"\\\x00-\x1f\x7f]+")


def check_slice_by(slice_by: list[str]) -> None:
    """For a Config's ``validate``: every slice column must be a scalar record column or a
    key of the records' metadata (``metadata.task``, ``metadata.user.tier``)."""
    bad = [c for c in slice_by if c not in SLICEABLE and
           not (c.startswith("metadata.") and all(c.split(".")[1:]) and
                _METADATA_KEY.fullmatch(c))]
    if bad:
        import difflib

        close = difflib.get_close_matches(bad[0], SLICEABLE, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ValueError(f"slice_by: {bad} are not record columns; {hint}choose from "
                         f"{', '.join(SLICEABLE)}, or a metadata key as metadata.<key>")


def slice_sql(column: str, alias: str | None = None) -> str:
    """The SQL select item of a slice column: the column itself, or for ``metadata.<path>``
    the metadata value at that path as text, named ``metadata.<path>``."""
    prefix = f"{alias}." if alias else ""
    if column.startswith("metadata."):
        path = "$" + "".join(f'."{p}"' for p in column.split(".")[1:])
        # metadata that is not JSON (a source may keep plain text) has no keys: null
        return (f"CASE WHEN json_valid({prefix}metadata) THEN json_extract_string("
                f"{prefix}metadata, {sql_literal(path)}) END AS {quote_identifier(column)}")
    return f"{prefix}{quote_identifier(column)}"


def value_groups(column: pa.ChunkedArray | pa.Array) -> list[tuple[object, np.ndarray]]:
    """Each distinct value of ``column`` (null included) in order of first appearance, with
    the ascending row indices that hold it: one dictionary encoding and one stable sort,
    instead of a filter pass per value."""
    encoded = pc.dictionary_encode(one_array(column), null_encoding="encode")
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    if len(encoded.dictionary) <= 1 << 16:  # numpy sorts 8- and 16-bit keys by radix: linear
        codes = codes.astype(np.uint8 if len(encoded.dictionary) <= 1 << 8 else np.uint16)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(encoded.dictionary) + 1))
    return [(value, order[bounds[k]:bounds[k + 1]])
            for k, value in enumerate(encoded.dictionary.to_pylist())]


def slices(table: pa.Table, slice_by: list[str]) -> Iterator[tuple[str, pa.Table]]:
    """``("all", table)``, then ``("col=value", rows)`` for each value of each column in
    ``slice_by`` (null values as ``col=null``), in order of first appearance."""
    yield "all", table
    for col in slice_by:
        for value, idx in value_groups(table.column(col)):
            yield f"{col}={'null' if value is None else value}", table.take(idx)


_FEW_DISTINCT = 256
_FEW_SAMPLE = 4 * _FEW_DISTINCT  # rows looked at first for more than _FEW_DISTINCT levels
LARGE_N = 20_000
"""Above this many values, intervals come from closed forms (normal for a mean, order
statistics for a quantile) that the bootstrap converges to, instead of n_boot × n draws."""


def exponent(values: np.ndarray) -> int:
    """The power of two ``e`` that brings the largest magnitude among ``values`` into
    [1, 2) when they are multiplied by 2⁻ᵉ (``np.ldexp(values, -e)``); 0 with no value, or
    none that is finite and non-zero. Scaling by a power of two is exact in floating point,
    and every statistic here is equivariant under it: computed on the scaled values and
    scaled back, a mean, a deviation or a correlation has the same bits as on values near
    1, where sums of squares neither overflow (scores of 1e200, latencies of 1e308 gave
    ``inf`` and NaN) nor underflow (scores of 1e-200 had "no spread")."""
    finite = np.abs(values[np.isfinite(values)]) if len(values) else values
    top = float(np.max(finite)) if len(finite) else 0.0
    return math.frexp(top)[1] - 1 if top > 0.0 else 0


def unscaled(x: float, e: int) -> float:
    """``x``·2ᵉ: a statistic computed on values scaled by :func:`exponent` brought back to
    their unit (``inf`` where it lies beyond the largest float, which a metric row never
    holds: see :func:`evalkit.metrics._signals.metric_row`)."""
    with np.errstate(over="ignore"):
        return float(np.ldexp(x, e))


def mean_of(values: np.ndarray) -> float:
    """The mean of ``values`` (at least one, finite) without overflow: the mean of finite
    values is finite, where summing 1e308 and 1.5e308 first gave ``inf``."""
    e = exponent(values)
    return unscaled(float(np.ldexp(values, -e).mean()), e)


def std_of(values: np.ndarray) -> float:
    """The sample standard deviation (ddof 1) of at least two finite ``values``, without
    overflow (1e308 and −1e308) or underflow (subnormal scores gave 0)."""
    e = exponent(values)
    return unscaled(float(np.ldexp(values, -e).std(ddof=1)), e)


def mean_ci(values: np.ndarray, n_boot: int = 1000, seed: int = 0,
            confidence: float = 0.95, proportion: bool = True,
            within: tuple[float, float] | None = None,
            ) -> Bounds:
    """``(low, high, method)`` of the mean of ``values``, a :class:`Bounds` whose
    ``mc_error`` is the bootstrap's Monte-Carlo error where one was drawn (else None):

    - values all 0 or 1 are a proportion: Wilson's interval (``"wilson"``,
      :func:`wilson_ci`), which does not collapse to a point at 0 or 1 as the bootstrap
      does (0 of 3 gave [0, 0]);
    - else the studentized bootstrap (``"bootstrap-t"``; Efron & Tibshirani 1993, ch. 12),
      which corrects for skew where the percentile bootstrap under-covers (lognormal
      latencies at 20 records: 89% for a "95%" interval, 93% studentized). Resamples are
      multinomial counts of the distinct levels when there are few (flags, Likert scores:
      O(``n_boot`` × levels)), else rows of indices into the sorted values
      (:func:`resample_indices`);
    - where more than a tail's share of the resamples have no spread (n = 2 or 3, few
      levels), Student's t interval (``"t"``, mean ± t₁₋α/₂,ₙ₋₁·s/√n): the bootstrap-t
      cannot place its quantiles there, and collapsed to the mean at n = 2;
    - above 20,000 values with many levels, the normal interval the bootstrap converges to
      (``"normal"``, mean ± z·s/√n).

    ``proportion=False`` (a latency, a cost: 0 and 1 are amounts, not flags) skips Wilson;
    ``within`` (the range a mean cannot leave, e.g. a Brier score's [0, 1]) clips the bounds.

    ``(None, None, None)`` with no value, fewer than two that are not 0/1, values that are
    all equal (no spread to resample), or ``n_boot`` = 0 (no interval)."""
    # on values scaled near 1 (:func:`exponent`), where no scaling may turn amounts into
    # flags (0 and 0.5 into 0 and 1) nor flags into amounts
    e = 0 if proportion and np.all((values == 0.0) | (values == 1.0)) else exponent(values)
    found = _mean_ci(np.ldexp(values, -e), n_boot, seed, confidence, proportion and not e)
    if not isinstance(found, Bounds):  # a closed form, or no interval: no Monte-Carlo error
        found = Bounds(found)
    if e and found[0] is not None:
        mc = None if found.mc_error is None else unscaled(found.mc_error, e)
        found = Bounds((unscaled(found[0], e), unscaled(found[1], e), found[2]), mc)
    if within is None or found[0] is None or found[1] is None:
        return found
    lo, hi = (float(np.clip(b, *within)) for b in found[:2])
    return Bounds((lo, hi, found[2]), found.mc_error)


def mean_ci_open(n: int, n_boot: int, what: str = "value") -> dict[str, str]:
    """``{"ci_open": why}`` for a mean of ``n`` values (``what`` they are, in the reason) to
    which :func:`mean_ci` gave no interval though one was asked for (``n_boot`` > 0): one
    value, or all equal; ``{}`` with no value or no interval asked for. The metrics that
    take a mean's interval share it, so their reasons do not drift apart."""
    if n < 1 or n_boot <= 0:
        return {}
    return {"ci_open": "one value: no interval of a mean" if n == 1 else
            f"every {what} is equal: no spread to build an interval from"}


def _mean_ci(values: np.ndarray, n_boot: int, seed: int, confidence: float,
             proportion: bool) -> tuple[float | None, float | None, str | None]:
    n = len(values)
    if n < 1 or n_boot <= 0:
        return None, None, None
    ones = int(np.count_nonzero(values == 1.0))
    if proportion and ones + int(np.count_nonzero(values == 0.0)) == n:
        lo, hi = wilson_ci(ones, n, confidence)
        return lo, hi, "wilson"
    if n < 2 or np.all(values == values[0]):
        return None, None, None
    alpha = (1.0 - confidence) / 2
    values = np.sort(values)  # the same bits and draws whatever the records' order
    mean = float(values.mean())
    sd = float(values.std(ddof=1))
    # more distinct values in the first rows than a few levels allow: no need to count them
    # all to find out (the full np.unique of 750,000 latencies cost 46 ms, for nothing)
    few = len(np.unique(values[:_FEW_SAMPLE])) <= _FEW_DISTINCT
    if few:
        levels, counts = np.unique(values, return_counts=True)
        few = len(levels) <= _FEW_DISTINCT
    if few:
        rng = np.random.default_rng(seed)
        drawn = rng.multinomial(n, counts / n, size=n_boot).astype(float)
        dev = levels - mean
        t = _studentized(drawn @ dev, drawn @ (dev * dev), n)
    elif n <= LARGE_N:
        t = np.concatenate([_studentized((values[idx] - mean).sum(axis=1),
                                         ((values[idx] - mean) ** 2).sum(axis=1), n)
                            for idx in resample_indices(n, n_boot, seed)])
    else:
        from statistics import NormalDist

        half = NormalDist().inv_cdf(1 - alpha) * sd / np.sqrt(n)
        return mean - half, mean + half, "normal"
    se = sd / np.sqrt(n)
    if np.count_nonzero(np.isnan(t)) > alpha * len(t):
        # more resamples without spread than a tail holds: the t* distribution cannot place
        # its quantiles (at n = 2 every defined t* is 0, and the interval was the mean alone)
        from evalkit.metrics._intervals import t_quantile

        half = t_quantile(1 - alpha, n - 1) * se
        return mean - half, mean + half, "t"
    t = t[~np.isnan(t)]
    t_lo, t_hi = percentile_interval(t, alpha)
    if t_lo is None or t_hi is None:
        return None, None, None
    # a bound is mean − t*·se: its Monte-Carlo error is se times that of the t quantile
    errors = [e for q in (alpha, 1 - alpha) if (e := quantile_mc_error(t, q)) is not None]
    return Bounds((mean - t_hi * se, mean - t_lo * se, "bootstrap-t"),
                  se * max(errors) if errors else None)


def _studentized(sum_dev: np.ndarray, sum_sq: np.ndarray, n: int) -> np.ndarray:
    """Per resample, (mean* − mean) / (s* / √n) from the sums of the deviations from the
    sample's mean and of their squares; NaN where the resample has no spread."""
    var = (sum_sq - sum_dev * sum_dev / n) / (n - 1)
    out = np.full(len(var), np.nan)
    spread = var > 1e-12 * (sum_sq / n + 1e-300)
    out[spread] = (sum_dev[spread] / n) / np.sqrt(var[spread] / n)
    return out


def bootstrap_ci(
    values: np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """Expanded percentile bootstrap interval (:func:`bootstrap_bounds`) of ``stat`` over
    ``values`` (1-D, or 2-D rows resampled together); the mean of 1-D values goes through
    :func:`mean_ci`. ``(None, None)`` with fewer than two values or ``n_boot`` = 0."""
    if stat is np.mean and values.ndim == 1:
        return mean_ci(values, n_boot, seed, confidence).interval
    if len(values) < 2 or n_boot <= 0:
        return None, None
    return _resampled(values, stat, n_boot, seed, confidence)


def resample_indices(n: int, n_boot: int, seed: int,
                     cells: int = 4_000_000) -> Iterator[np.ndarray]:
    """The bootstrap's ``n_boot`` seeded resamples of ``n`` row indices, as blocks of shape
    ``(resamples, n)`` holding at most ``cells`` indices so memory stays bounded whatever n
    is (the block size does not change the draws)."""
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, cells // n))
    for start in range(0, n_boot, block):
        yield rng.integers(0, n, size=(min(block, n_boot - start), n))


class Bounds(tuple):
    """An interval as a plain tuple (``(low, high)``, or ``(low, high, method)`` from
    :func:`mean_ci`) carrying ``mc_error``: the larger of its bounds' Monte-Carlo standard
    errors where a bootstrap drew them (what another seed would move them by), else None.
    :func:`evalkit.metrics._signals.metric_row` records it as ``details.mc_error``."""

    mc_error: float | None

    def __new__(cls, values: tuple[Any, ...], mc_error: float | None = None) -> Bounds:
        self = super().__new__(cls, values)
        self.mc_error = None if mc_error is None else float(mc_error)  # JSON: a number
        return self

    @property
    def interval(self) -> Bounds:
        """``(low, high)`` alone (a :func:`mean_ci` result without its method), with the
        same ``mc_error``."""
        return Bounds(self[:2], self.mc_error)


def share_mc_error(q: float, b: int) -> float:
    """The Monte-Carlo standard error of a share ``q`` of ``b`` resamples, √(q(1 − q)/b),
    with ``q`` taken at no less than one resample in ``b`` (a share of 0 from few resamples
    is not a settled one). The paired bootstrap's p-value
    (:func:`evalkit.comparison._significance.bootstrap_test`) and a percentile bound
    (:func:`quantile_mc_error`) both take their error from it."""
    b = max(b, 1)
    floor = max(q, 1.0 / b)
    return math.sqrt(floor * max(1.0 - floor, 0.0) / b)


def quantile_mc_error(boot: np.ndarray, q: float, method: str = "linear") -> float | None:
    """The Monte-Carlo standard error of the ``q`` quantile of the ``b`` resampled
    statistics ``boot`` (a percentile bound): the share of resamples below the bound has
    standard error s = :func:`share_mc_error` (q, b), so the bound moves between the
    quantiles q ± s, whose half-distance is its standard error (the order-statistic
    estimate; Maritz & Jarrett 1978 refine it, at a cost this needs not). None where that
    spread is not finite (an infinite resample)."""
    s = share_mc_error(min(q, 1.0 - q), len(boot))
    lo, hi = np.quantile(boot, [max(q - s, 0.0), min(q + s, 1.0)], method=method)
    half = (float(hi) - float(lo)) / 2
    return half if math.isfinite(half) else None


@functools.lru_cache(maxsize=4096)  # t's quantile by bisection: 2.5 ms, once per (n, level)
def expanded_alpha(n: int, confidence: float) -> float:
    """The tail share of Hesterberg's expanded percentile interval over ``n`` records:
    α′/2 = Φ(−√(n/(n − 1))·t₁₋α/₂,ₙ₋₁). The plain percentile interval is too narrow at
    small n (it has the bootstrap's divisor n and the normal's z where a t applies); the
    expansion corrects both (Hesterberg 2015, *What teachers should know about the
    bootstrap*, The American Statistician 69(4): 371–386). At 20 records and 95% it takes the
    1.6% and 98.4% quantiles; at 300, 2.4% and 97.6%."""
    from statistics import NormalDist

    from evalkit.metrics._intervals import t_quantile

    alpha = 1.0 - confidence
    if n < 2:
        return alpha / 2
    return NormalDist().cdf(-math.sqrt(n / (n - 1)) * t_quantile(1 - alpha / 2, n - 1))


def bootstrap_bounds(boot: np.ndarray, n: int, confidence: float, method: str = "linear",
                     ) -> Bounds:
    """The expanded percentile interval (:func:`expanded_alpha`) of the resampled
    statistics ``boot`` over ``n`` records, leaving out resamples where the statistic is
    undefined (NaN), with the Monte-Carlo error of its bounds (:func:`quantile_mc_error`,
    the larger of the two); ``(None, None)`` when none is defined. ``method`` is numpy's
    quantile method."""
    boot = boot[~np.isnan(boot)]
    if not len(boot):
        return Bounds((None, None))
    a = expanded_alpha(n, confidence)
    lo, hi = percentile_interval(boot, a, method)
    errors = [e for q, bound in ((a, lo), (1 - a, hi))
              if bound is not None and math.isfinite(bound)
              and (e := quantile_mc_error(boot, q, method)) is not None]
    return Bounds((lo, hi), max(errors) if errors else None)


def index_bootstrap(fn: Callable[[np.ndarray], float], n: int, n_boot: int, seed: int,
                    confidence: float) -> Bounds:
    """The expanded percentile interval (:func:`bootstrap_bounds`) of ``fn`` over ``n_boot``
    resamples of the indices ``0..n-1`` (:func:`resample_indices`): ``fn`` takes a row of
    indices, so a statistic of whole clusters (a record's repeats) resamples the clusters."""
    boot = np.array([fn(row) for block in resample_indices(n, n_boot, seed) for row in block])
    return bootstrap_bounds(boot, n, confidence)


def percentile_interval(boot: np.ndarray, alpha: float, method: str = "linear",
                        ) -> tuple[float | None, float | None]:
    """The ``alpha`` and ``1 - alpha`` quantiles of the bootstrap statistics ``boot``,
    leaving out the resamples where the statistic is undefined (NaN); ``(None, None)`` when
    none is defined. ``method`` is numpy's quantile method."""
    boot = boot[~np.isnan(boot)]
    if not len(boot):
        return None, None
    lo, hi = np.quantile(boot, [alpha, 1 - alpha], method=method)
    return float(lo), float(hi)


def _resampled(values: np.ndarray, stat: Callable[[np.ndarray], float], n_boot: int,
               seed: int, confidence: float) -> Bounds:
    """Expanded percentile interval (:func:`bootstrap_bounds`) of ``stat`` over ``n_boot``
    resamples of the rows of ``values``,
    drawn over the rows in canonical order (:func:`~evalkit.metrics._intervals.canonical`:
    the interval depends on the data, not on the records' order)."""
    if values.ndim == 1:
        values = np.sort(values)
    else:
        values = np.column_stack(canonical(list(values.T)))
    stats = []
    for idx in resample_indices(len(values), n_boot, seed):
        if values.ndim == 1 and stat is np.mean:
            stats.append(values[idx].mean(axis=1))
        else:
            stats.append(np.array([stat(values[i]) for i in idx], dtype=float))
    return bootstrap_bounds(np.concatenate(stats), len(values), confidence)


def quantile_cis(values: np.ndarray, qs: list[float], confidence: float
                 ) -> list[tuple[float | None, float | None, str | None]]:
    """:func:`quantile_interval` of each quantile in ``qs`` over one sort of ``values``:
    ``(low, high, why a bound is open)``, each bound moved out to numpy's linear estimate
    of the quantile (the metrics' value) where that estimate lies beyond it: at extreme
    quantiles of few values the interpolation passes the order statistic that bounds the
    quantile (the p99.9 of 29 values was 28.972 with the interval [29.0, open)); a wider
    interval covers no less often."""
    ordered = np.sort(values)
    e = exponent(ordered)  # the estimate near 1, as the distribution metric takes it
    near = np.ldexp(ordered, -e)
    out = []
    for q in qs:
        lo, hi, why = quantile_interval(ordered, q, confidence)
        est = unscaled(float(np.quantile(near, q)), e)
        out.append((None if lo is None else min(lo, est), None if hi is None else max(hi, est),
                    why))
    return out
