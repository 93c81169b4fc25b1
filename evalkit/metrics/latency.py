"""``latency``: p50, p95, p99 and mean of record latency, per slice: each percentile with its
distribution-free order-statistic interval, the mean with a bootstrap one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.metrics._signals import (
    SliceConfig,
    excluded_mask,
    index_slices,
    metric_row,
    row_counts,
)
from evalkit.metrics._stats import mean_ci, mean_ci_open, mean_of, quantile_cis, slice_sql
from evalkit.plugin import Metric, Produces

__all__ = ["LatencyConfig", "LatencyMetric"]

_NUMERIC = ("latency_s", "cost_usd", "input_tokens", "output_tokens", "confidence")


@dataclass(frozen=True)
class LatencyConfig(SliceConfig):
    column: str = "latency_s"  # the numeric record column to summarise
    percentiles: list[float] = field(default_factory=lambda: [50.0, 95.0, 99.0])  # 0-100
    include_excluded: bool = False  # also count records a filter set aside (failed calls)

    def validate(self) -> None:
        super().validate()
        if self.column not in _NUMERIC:
            import difflib

            close = difflib.get_close_matches(self.column, _NUMERIC, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise ValueError(f"column: {self.column!r} is not a numeric record column; {hint}"
                             f"choose from {', '.join(_NUMERIC)}")
        bad = [q for q in self.percentiles if not 0.0 <= q <= 100.0]
        if bad:
            raise ValueError(f"percentiles: {bad} are not within [0, 100]")


def _stat_name(q: float) -> str:
    return f"p{q:g}".replace(".", "_")


class LatencyMetric(Metric):
    """Rows ``<name>.p50``, ``.p95``, ``.p99`` (numpy's linear-interpolation percentiles)
    and ``<name>.mean`` per slice, in the column's unit (seconds for ``latency_s``).
    Records with no (or a negative, or non-finite) latency are unscored."""

    Config = LatencyConfig
    higher_is_better = False
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: LatencyConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        """One name per percentile, and the mean."""
        stats = [_stat_name(q) for q in self.config.percentiles] + ["mean"]
        return Produces(tuple(f"{self.name}.{s}" for s in stats),
                        slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        table = con.execute(
            f'SELECT excluded_by, "{cfg.column}" AS x'
            + "".join(f", {slice_sql(c)}" for c in dict.fromkeys(cfg.slice_by))
            + " FROM records ORDER BY record_id").to_arrow_table()
        x = np.array(table.column("x").to_numpy(zero_copy_only=False), dtype=float)
        negative = x < 0
        x[~np.isfinite(x) | (x < 0)] = np.nan
        excluded = excluded_mask(table)
        names = [_stat_name(q) for q in cfg.percentiles]
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            considered = idx if cfg.include_excluded else idx[~excluded[idx]]
            use = considered[~np.isnan(x[considered])]
            # sorted: the percentiles, the mean's bits and its resamples are then a function
            # of the values, not of the order the records came in
            v = np.sort(x[use])
            counts = row_counts(idx, excluded, considered, use)
            details: dict[str, Any] = {"column": cfg.column,
                                       "include_excluded": cfg.include_excluded}
            if negative[considered].any():
                details["n_negative_ignored"] = int(negative[considered].sum())
            undefined = f"no record with a {cfg.column} in this slice"
            values = np.percentile(v, list(cfg.percentiles)) if len(v) else [None] * len(names)
            cis = quantile_cis(v, [q / 100 for q in cfg.percentiles], cfg.confidence) \
                if len(v) and cfg.n_boot > 0 else [(None, None, None)] * len(names)
            for name, value, (lo, hi, why) in zip(names, values, cis, strict=True):
                extra: dict[str, Any] = {"what": f"{name} of {cfg.column}"}
                if cfg.n_boot > 0 and len(v):
                    extra["ci_method"] = "order statistics"
                if why:
                    extra["ci_open"] = why
                rows.append(metric_row(f"{self.name}.{name}", label,
                                       None if value is None else float(value), (lo, hi),
                                       **counts, details={**details, **extra},
                                       undefined=undefined))
            # a latency or a count of 0 or 1 is an amount, not a flag: no Wilson interval
            found = mean_ci(v, cfg.n_boot, cfg.seed, cfg.confidence, proportion=False)
            method = found[2]
            extra = {"what": f"mean of {cfg.column}"}
            if method:
                extra["ci_method"] = method
            else:
                extra.update(mean_ci_open(len(v), cfg.n_boot))
            rows.append(metric_row(f"{self.name}.mean", label,
                                   mean_of(v) if len(v) else None,
                                   found.interval,
                                   **counts, details={**details, **extra},
                                   undefined=undefined))
        return rows
