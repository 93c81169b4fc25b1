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


def bootstrap_ci(
    values: np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of ``stat`` over ``values`` (1-D, or 2-D rows resampled
    together). ``(None, None)`` with fewer than two values or ``n_boot`` = 0."""
    n = len(values)
    if n < 2 or n_boot <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    if values.ndim == 1 and stat is np.mean:
        stats = values[idx].mean(axis=1)
    else:
        stats = np.array([stat(values[i]) for i in idx])
    stats = stats[~np.isnan(stats)]
    if not len(stats):
        return None, None
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
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
