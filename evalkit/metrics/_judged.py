"""The per-record view of one judge's verdicts that ``mean`` and ``rate`` summarise: raw (every
record with a usable score) beside filtered (included records only), and what the filters
took out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._signals import SliceConfig, judgment_join, metric_row
from evalkit.metrics._stats import mean_ci, slices


@dataclass(frozen=True)
class JudgeMetricConfig(SliceConfig):
    judge: str = "???"  # the judge instance (or imported score name) to summarise
    raw: bool = True  # also report over all records (before filters), and the difference


def judged_table(con: Any, judge: str, slice_by: list[str]) -> pa.Table:
    """One row per record: slice columns, ``excluded_by``, and the judge's ``value``,
    ``passed``, ``label`` and ``status`` (null when the judge left no judgment)."""
    cols = ", ".join(f'r."{c}"' for c in dict.fromkeys(["excluded_by", *slice_by]))
    join, params = judgment_join(judge, ["value", "passed", "label"], "j")
    return con.execute(f"SELECT r.record_id, {cols}, j.value, j.passed, j.label, j.status "
                       f"FROM records r {join}", params).to_arrow_table()


def judge_metric_rows(con: Any, cfg: JudgeMetricConfig, name: str,
                      score: Callable[[pa.Table], pa.Array], what: str) -> list[dict[str, Any]]:
    """Rows of a per-record statistic (``score`` maps the judged table to floats, null when
    unusable): filtered (``name``), raw (``name.raw``) and the filters' effect
    (``name.filter_effect`` = raw − filtered, with a breakdown by filter)."""
    table = judged_table(con, cfg.judge, list(cfg.slice_by))
    known = table.column("status").null_count < table.num_rows
    rows: list[dict[str, Any]] = []
    for label, part in slices(table, list(cfg.slice_by)):
        values = score(part)
        excluded = pc.is_valid(part.column("excluded_by"))
        usable = pc.is_valid(values)
        inc_vals = values.filter(pc.and_(pc.invert(excluded), usable))
        n = part.num_rows
        n_exc = pc.sum(excluded).as_py() or 0
        details: dict[str, Any] = {"what": what}
        if not known:
            details["undefined"] = f"no judgments from judge '{cfg.judge}' in this run"
        filt = _row(name, label, inc_vals, n, n_exc, n - n_exc - len(inc_vals), cfg, details)
        rows.append(filt)
        if not cfg.raw:
            continue
        raw_vals = values.filter(usable)
        raw_details: dict[str, Any] = {"what": what + ", over all records before filters"}
        if n_exc and len(raw_vals) == len(inc_vals):
            raw_details["note"] = ("no excluded record has a usable value (the judge skips "
                                   "excluded records), so raw covers the same records as "
                                   "filtered")
        raw = _row(f"{name}.raw", label, raw_vals, n, n_exc, n - len(raw_vals), cfg,
                   raw_details)
        rows.append(raw)
        by_filter = {}
        for f in pc.unique(part.column("excluded_by")).to_pylist():
            if f is None:
                continue
            sel = pc.and_(pc.fill_null(pc.equal(part.column("excluded_by"), f), False), usable)
            vals = values.filter(sel)
            by_filter[f] = {"n_excluded": pc.sum(pc.equal(part.column("excluded_by"), f))
                            .as_py(), "n_scored": len(vals),
                            "mean": pc.mean(vals).as_py() if len(vals) else None}
        effect = None
        if raw["value"] is not None and filt["value"] is not None:
            effect = raw["value"] - filt["value"]
        rows.append({"metric": f"{name}.filter_effect", "slice": label, "value": effect,
                     "n_attempted": n, "n_excluded": n_exc, "n_judged": len(raw_vals),
                     "n_unscored": n - len(raw_vals),
                     "details": {"what": "raw minus filtered: how much the filters moved the "
                                 "number", "by_filter": by_filter}})
    return rows


def _row(metric: str, label: str, values: pa.Array, n: int, n_exc: int, n_unscored: int,
         cfg: JudgeMetricConfig, details: dict[str, Any]) -> dict[str, Any]:
    arr = np.asarray(values.to_numpy(zero_copy_only=False), dtype=float)
    lo, hi, method = mean_ci(arr, cfg.n_boot, cfg.seed, cfg.confidence)
    if method is not None:
        details = {**details, "ci_method": method}
    return metric_row(metric, label, float(arr.mean()) if len(arr) else None, (lo, hi), n,
                      n_exc, len(arr), n_unscored, details,
                      details.get("undefined") or "no scored records in this slice")
