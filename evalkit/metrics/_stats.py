"""Statistics shared by metrics: bootstrap confidence intervals and slicing."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.results.schemas import RECORDS

SLICEABLE = [f.name for f in RECORDS if not pa.types.is_list(f.type)]


def check_slice_by(slice_by: list[str]) -> None:
    """For a Config's ``validate``: every slice column must be a scalar record column."""
    bad = [c for c in slice_by if c not in SLICEABLE]
    if bad:
        raise ValueError(f"slice_by: {bad} are not record columns; choose from "
                         f"{', '.join(SLICEABLE)}")


NORMAL_APPROX_N = 10_000
"""From this many values on, the CI of a mean uses the normal approximation: the bootstrap
percentile interval converges to it, and resampling would cost n × n_boot draws."""


def bootstrap_ci(
    values: np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of ``stat`` over ``values`` (1-D, or 2-D rows resampled
    together). ``(None, None)`` with fewer than two values or ``n_boot`` = 0. The mean of
    :data:`NORMAL_APPROX_N` or more values gets the normal-approximation interval."""
    n = len(values)
    if n < 2 or n_boot <= 0:
        return None, None
    alpha = (1.0 - confidence) / 2
    if stat is np.mean and values.ndim == 1 and n >= NORMAL_APPROX_N:
        from statistics import NormalDist

        z = NormalDist().inv_cdf(1 - alpha)
        mean, half = float(values.mean()), z * float(values.std(ddof=1)) / np.sqrt(n)
        return float(mean - half), float(mean + half)
    rng = np.random.default_rng(seed)
    # resample in blocks so memory stays near 8 MB whatever n and n_boot are
    block = max(1, 1_000_000 // n)
    stats: list[np.ndarray] = []
    for start in range(0, n_boot, block):
        idx = rng.integers(0, n, size=(min(block, n_boot - start), n))
        if values.ndim == 1 and stat is np.mean:
            stats.append(values[idx].mean(axis=1))
        else:
            stats.append(np.array([stat(values[i]) for i in idx], dtype=float))
    flat = np.concatenate(stats)
    flat = flat[~np.isnan(flat)]
    if not len(flat):
        return None, None
    lo, hi = np.quantile(flat, [alpha, 1 - alpha])
    return float(lo), float(hi)


def slices(table: pa.Table, slice_by: list[str]) -> Iterator[tuple[str, pa.Table]]:
    """``("all", table)``, then ``("col=value", rows)`` for each value of each column in
    ``slice_by`` (null values as ``col=null``)."""
    yield "all", table
    for col in slice_by:
        column = table.column(col)
        for value in pc.unique(column).to_pylist():
            mask = pc.is_null(column) if value is None else pc.equal(column, value)
            yield f"{col}={'null' if value is None else value}", table.filter(
                pc.fill_null(mask, False))


def bootstrap_ci_bounded(
    values: np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    max_cells: int = 4_000_000,
) -> tuple[float | None, float | None]:
    """:func:`bootstrap_ci` with memory bounded by ``max_cells`` resample indices at a time
    (drawn in chunks of resamples), so a million values do not allocate ``n_boot`` × n
    indices at once. Same interval definition; ``(None, None)`` under the same conditions."""
    n = len(values)
    if n < 2 or n_boot <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, max_cells // n))
    stats = []
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - start), n))
        if values.ndim == 1 and stat is np.mean:
            stats.append(values[idx].mean(axis=1))
        else:
            stats.append(np.array([stat(values[i]) for i in idx]))
    boot = np.concatenate(stats)
    boot = boot[~np.isnan(boot)]
    if not len(boot):
        return None, None
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    return float(lo), float(hi)
