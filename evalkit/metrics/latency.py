"""``latency``: p50, p95, p99 and mean of record latency, per slice, with bootstrap CIs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.metrics._pair_statistics import bootstrap
from evalkit.metrics._signals import SliceConfig, excluded_mask, index_slices, metric_row
from evalkit.metrics._stats import LARGE_N, mean_ci, quantile_cis, slice_sql
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


def _percentiles(qs: list[float]) -> dict[str, Any]:
    """One statistic per percentile of the rows of ``v``, all computed by one numpy call per
    array (one partition of each row for every percentile, not one per percentile: the
    bootstrap of a slice calls each statistic on the same block of resamples in turn)."""
    last: list[Any] = [None, None]  # the array (held, so its id is not reused) and its result

    def of(v: np.ndarray) -> np.ndarray:
        if last[0] is not v:
            last[:] = [v, np.percentile(v, qs, axis=1)]
        return last[1]

    return {_stat_name(q): (lambda v, k=k: of(v)[k]) for k, q in enumerate(qs)}


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
        stats: dict[str, Any] = _percentiles(list(cfg.percentiles))
        stats["mean"] = lambda v: v.mean(axis=1)
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            considered = idx if cfg.include_excluded else idx[~excluded[idx]]
            use = considered[~np.isnan(x[considered])]
            v = x[use]
            counts = {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum()),
                      "n_judged": len(use), "n_unscored": len(considered) - len(use)}
            details: dict[str, Any] = {"column": cfg.column,
                                       "include_excluded": cfg.include_excluded}
            if negative[considered].any():
                details["n_negative_ignored"] = int(negative[considered].sum())
            if len(v) > LARGE_N and cfg.n_boot > 0:
                # closed forms the bootstrap converges to: O(n log n), not n_boot × n
                cis = dict(zip(map(_stat_name, cfg.percentiles), quantile_cis(
                    v, [q / 100 for q in cfg.percentiles], cfg.confidence), strict=True))
                cis["mean"] = mean_ci(v, cfg.n_boot, cfg.seed, cfg.confidence)[:2]
                details["ci_method"] = "order statistics (percentiles), normal (mean)"
            else:
                cis = bootstrap([v], stats, cfg.n_boot, cfg.seed, cfg.confidence) if len(v) \
                    else {}
            for stat, fn in stats.items():
                value = float(fn(v[None, :])[0]) if len(v) else None
                rows.append(metric_row(f"{self.name}.{stat}", label, value,
                                       cis.get(stat, (None, None)), **counts,
                                       details={**details, "what": f"{stat} of {cfg.column}"},
                                       undefined=f"no record with a {cfg.column} in this slice"))
        return rows
