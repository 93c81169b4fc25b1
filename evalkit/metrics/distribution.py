"""``distribution``: the shape of a judge's values (or of a numeric record column such as
``latency_s``): histogram buckets, mean, p50, p95 and standard deviation, by slice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._judged import judged_cursor_group, judged_table
from evalkit.metrics._signals import SliceConfig, metric_row
from evalkit.metrics._stats import (
    exponent,
    mean_ci,
    mean_of,
    quantile_cis,
    slice_sql,
    slices,
    std_of,
    unscaled,
)
from evalkit.plugin import Metric, Produces
from evalkit.results.schemas import RECORDS

__all__ = ["DistributionConfig", "DistributionMetric"]


def _numeric_column(name: str) -> bool:
    return name in RECORDS.names and (pa.types.is_floating(RECORDS.field(name).type)
                                      or pa.types.is_integer(RECORDS.field(name).type))


@dataclass(frozen=True)
class DistributionConfig(SliceConfig):
    judge: str | None = None  # the judge whose values to describe
    column: str | None = None  # or a numeric record column (latency_s, cost_usd, …)
    bins: int = 10  # histogram buckets
    range: list[float] | None = None  # [low, high] of the buckets; default: the data's range
    included_only: bool = True  # false: describe every record, excluded ones too

    def validate(self) -> None:
        super().validate()
        if (self.judge is None) == (self.column is None):
            raise ValueError("set exactly one of judge or column")
        if self.column is not None and not _numeric_column(self.column):
            raise ValueError(f"column: {self.column!r} is not a numeric record column")
        if self.bins < 1:
            raise ValueError("bins: must be at least 1")
        if self.range is not None and (len(self.range) != 2 or self.range[0] >= self.range[1]):
            raise ValueError(f"range: {list(self.range)} must be [low, high] with low < high")


def _quantile(a: np.ndarray, q: float) -> float:
    # near 1 (exact): the interpolation's x₍ₖ₊₁₎ − x₍ₖ₎ of -1e308 and 1e308 overflowed
    e = exponent(a)
    return unscaled(float(np.quantile(np.ldexp(a, -e), q)), e)


def _p95(a: np.ndarray) -> float:
    return _quantile(a, 0.95)


def _p50(a: np.ndarray) -> float:
    return _quantile(a, 0.5)


class DistributionMetric(Metric):
    """Rows per slice: ``NAME`` (the mean, with the histogram, min, max, p50, p95 and std in
    ``details``), ``NAME.p50``, ``NAME.p95`` and ``NAME.std``. Judge values count when the
    judgment's status is ``ok`` and its value is not null."""

    Config = DistributionConfig
    higher_is_better = None
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: DistributionConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        """The mean (the instance name), median, 95th percentile and standard deviation."""
        return Produces((self.name, *(f"{self.name}{s}" for s in (".p50", ".p95", ".std"))),
                        slice_by=tuple(self.config.slice_by))

    def cursor_group(self) -> tuple[str, ...] | None:
        return judged_cursor_group(self.config)

    def _table(self, con: Any) -> pa.Table:
        cfg = self.config
        if cfg.judge is not None:
            table = judged_table(con, cfg.judge, list(cfg.slice_by))
            ok = pc.fill_null(pc.equal(table.column("status"), "ok"), False)
            values = pc.if_else(ok, table.column("value"), pa.scalar(None, pa.float64()))
        else:
            cols = ", ".join(slice_sql(c) for c in dict.fromkeys(["excluded_by", *cfg.slice_by]))
            table = con.execute(f'SELECT {cols}, CAST("{cfg.column}" AS DOUBLE) AS value '
                                "FROM records").to_arrow_table()
            values = table.column("value")
        return table.set_column(table.schema.get_field_index("value"), "value", values)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        """The distribution's rows for every slice."""
        cfg = self.config
        what = f"judge '{cfg.judge}' values" if cfg.judge else f"record column {cfg.column}"
        rows: list[dict[str, Any]] = []
        for label, part in slices(self._table(con), list(cfg.slice_by)):
            excluded = pc.is_valid(part.column("excluded_by"))
            keep = pc.invert(excluded) if cfg.included_only else pa.array(
                [True] * part.num_rows, pa.bool_())
            usable = pc.and_(keep, pc.is_valid(part.column("value")))
            arr = np.asarray(part.column("value").filter(usable).to_numpy(), dtype=float)
            arr = np.sort(arr)  # the statistics' bits and resamples: a function of the values
            kept = pc.sum(keep).as_py() or 0
            # n_excluded: what the filters kept out of these rows (none with included_only
            # false), so n_attempted = n_excluded + n_judged + n_unscored
            counts = {"n_attempted": part.num_rows, "n_excluded": part.num_rows - kept,
                      "n_judged": len(arr), "n_unscored": kept - len(arr)}
            rows.extend(self._rows(label, arr, counts, what))
        return rows

    def _ci(self, arr: np.ndarray, suffix: str, stat: Any, boot: dict[str, Any],
            ) -> tuple[tuple[float | None, float | None], dict[str, str]]:
        """The interval and what ``details`` says of it (``ci_method``; ``ci_open`` for a
        bound left open): the mean's from :func:`mean_ci` (Wilson for a judge's 0/1 values,
        else bootstrap, t or normal); the quantiles' the distribution-free order-statistic
        interval (:func:`quantile_cis`, as latency's, with its reason for an open bound);
        none for the standard deviation."""
        if stat is None or self.config.n_boot <= 0 or len(arr) < 2:
            return (None, None), {}
        if suffix == "":
            # a record column of 0 and 1 (seconds, dollars) is an amount, not a share
            found = mean_ci(arr, boot["n_boot"], boot["seed"], boot["confidence"],
                            proportion=self.config.column is None)
            return found.interval, {"ci_method": found[2]} if found[2] else {}
        lo, hi, why = quantile_cis(arr, [0.5 if suffix == ".p50" else 0.95],
                                   boot["confidence"])[0]
        return (lo, hi), {"ci_method": "order statistics", **({"ci_open": why} if why else {})}

    def _rows(self, label: str, arr: np.ndarray, counts: dict[str, int],
              what: str) -> list[dict[str, Any]]:
        cfg = self.config
        scope = "included records" if cfg.included_only else "all records"
        if not len(arr):
            return [{"metric": self.name, "slice": label, "value": None, **counts,
                     "details": {"what": f"distribution of {what} over {scope}",
                                 "undefined": "no values in this slice"}}]
        low, high = (cfg.range if cfg.range is not None
                     else (float(arr.min()), float(arr.max())))
        # the buckets are cut near 1 (:func:`exponent`: exact), where a range of -1e308 to
        # 1e308 has a finite width
        e = exponent(np.array([low, high], dtype=float))
        near = np.ldexp(np.clip(arr, low, high), -e)
        low_s, high_s = float(np.ldexp(low, -e)), float(np.ldexp(high, -e))
        if low_s == high_s:  # every value equal: one bucket around it (±0.5, or 2⁻²⁰ of it)
            pad = max(float(np.ldexp(0.5, -e)), 2.0 ** -20)
            low_s, high_s = low_s - pad, high_s + pad
        hist, edges = np.histogram(near, bins=cfg.bins, range=(low_s, high_s))
        edges = [unscaled(float(x), e) for x in edges]
        buckets = [{"low": edges[i], "high": edges[i + 1],
                    "count": int(hist[i])} for i in range(cfg.bins)]
        stats = {"mean": mean_of(arr), "p50": _p50(arr), "p95": _p95(arr),
                 "std": std_of(arr) if len(arr) > 1 else None,
                 "min": float(arr.min()), "max": float(arr.max())}
        boot = {"n_boot": cfg.n_boot, "seed": cfg.seed, "confidence": cfg.confidence}
        clipped = int(((arr < low) | (arr > high)).sum())
        details = {"what": f"distribution of {what} over {scope}", "histogram": buckets,
                   **stats, **({"clipped_to_range": clipped} if clipped else {})}
        out = []
        for suffix, value, stat in (("", stats["mean"], np.mean), (".p50", stats["p50"], _p50),
                                    (".p95", stats["p95"], _p95), (".std", stats["std"], None)):
            ci, how = self._ci(arr, suffix, stat, boot)
            row_details = {**(details if not suffix else {
                "what": f"{suffix[1:]} of {what} over {scope}"}), **how}
            if stat is not None and cfg.n_boot > 0 and ci[0] is None and ci[1] is None \
                    and "ci_open" not in how:
                row_details = {**row_details, "ci_open": (
                    "one value: no interval" if len(arr) == 1 else
                    "too few values (or none that differ) for an interval")}
            out.append(metric_row(self.name + suffix, label, value, ci, **counts,
                                  details=row_details,
                                  undefined="one value: no standard deviation"))
        return out
