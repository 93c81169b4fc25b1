"""``crosstab``: a judge's verdict (flagged or not, or its label) against a record column,
e.g. flagged × ``level`` (how many flags fall on failed calls) or failure mode × ``model``,
optionally among the records another judge flagged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.checks import check_flag_at
from evalkit.metrics._signals import excluded_mask, index_slices, judgment_join, metric_row
from evalkit.metrics._stats import SLICEABLE, mean_ci
from evalkit.plugin import Metric, Produces

__all__ = ["CrosstabConfig", "CrosstabMetric"]

_OF = ("flag", "label")
_FIELDS = ["value", "passed", "label"]


@dataclass(frozen=True)
class CrosstabConfig:
    judge: str = "???"  # the judge (or imported score) whose verdicts are tabulated
    by: str = "???"  # the record column to cross them with (level, model, …)
    of: str = "flag"  # flag: flagged / not_flagged; label: the judgment's label
    threshold: float | None = None  # flagged when value > threshold (flag_at); null: passed false
    flagged_by: str | None = None  # only records this judge flagged (e.g. a hallucination judge)
    flagged_threshold: float | None = None  # flagged_by's threshold; null: passed is false
    include_excluded: bool = True  # count records the filters set aside too
    flag_at: str = ">"  # a score at the threshold: ">" not flagged, ">=" flagged
    n_boot: int = 1000  # bootstrap resamples for the 95% CI of each share (0: none)
    seed: int = 0  # bootstrap seed
    confidence: float = 0.95  # CI level

    def validate(self) -> None:
        if self.of not in _OF:
            raise ValueError(f"of: {self.of!r} is not one of {', '.join(_OF)}")
        if self.by not in SLICEABLE:
            raise ValueError(f"by: {self.by!r} is not a record column; choose from "
                             f"{', '.join(SLICEABLE)}")
        if self.of == "label" and self.threshold is not None:
            raise ValueError("threshold: only used with of=flag")
        if self.flagged_threshold is not None and self.flagged_by is None:
            raise ValueError("flagged_threshold: set flagged_by too")
        check_flag_at(self.flag_at)


def _flag_sql(alias: str, threshold: float | None, flag_at: str) -> str:
    """SQL: true/false when the judgment says flagged/not, null when it gives no verdict."""
    ok = f"{alias}.status = 'ok'"
    if threshold is None:
        return f"CASE WHEN {ok} THEN NOT {alias}.passed END"
    op = ">" if flag_at == ">" else ">="
    return f"CASE WHEN {ok} THEN {alias}.value {op} {float(threshold)!r} END"


class CrosstabMetric(Metric):
    """One row per (category, slice): metric ``NAME.<category>``, slice ``all`` and
    ``<by>=<value>``; value = the share of the slice's categorised records in that category
    (its count in ``details``), with a bootstrap CI. Records with no verdict (no judgment,
    an error, a skip, a null label) are ``n_unscored``."""

    Config = CrosstabConfig
    higher_is_better = None
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: CrosstabConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def _table(self, con: Any) -> pa.Table:
        cfg = self.config
        category = (f"CASE {_flag_sql('j', cfg.threshold, cfg.flag_at)} WHEN true THEN 'flagged' "
                    "WHEN false THEN 'not_flagged' END" if cfg.of == "flag"
                    else "CASE WHEN j.status = 'ok' THEN j.label END")
        join, params = judgment_join(con, cfg.judge, _FIELDS, "j")
        cols = ", ".join(f'r."{c}"' for c in dict.fromkeys(["excluded_by", cfg.by]))
        sql = f"SELECT r.record_id, {cols}, {category} AS category FROM records r {join}"
        where = []
        if cfg.flagged_by is not None:
            join, flagged_params = judgment_join(con, cfg.flagged_by, _FIELDS, "f")
            sql += f" {join}"
            params += flagged_params
            where.append(f"coalesce({_flag_sql('f', cfg.flagged_threshold, cfg.flag_at)}, false)")
        if not cfg.include_excluded:
            where.append("r.excluded_by IS NULL")
        if where:
            sql += " WHERE " + " AND ".join(where)
        # a join's rows come in no set order: the slices' order and the bootstrap resamples
        # would change from one run of the same input to the next
        return con.execute(sql + " ORDER BY r.record_id", params).to_arrow_table()

    def produces(self) -> Produces:
        """``name.<category>`` per category (flagged and not_flagged, or the judge's labels,
        known from the data), sliced by ``by``; ``name`` alone when the judge gave none."""
        if self.config.of == "flag":
            return Produces((self.name, f"{self.name}.flagged", f"{self.name}.not_flagged"),
                            slice_by=(self.config.by,))
        return Produces((self.name,), (f"{self.name}.",), slice_by=(self.config.by,))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        """The crosstab's rows."""
        cfg = self.config
        table = self._table(con)
        known = con.execute("SELECT count(*) FROM judgments WHERE judge = ?",
                            [cfg.judge]).fetchone()[0]
        if cfg.of == "flag":
            cats = ["flagged", "not_flagged"]
        else:  # every label the judge gave, so a category with no record here still shows 0
            cats = [r[0] for r in con.execute(
                "SELECT DISTINCT label FROM judgments WHERE judge = ? AND status = 'ok' "
                "AND label IS NOT NULL ORDER BY label", [cfg.judge]).fetchall()]
        base = {"judge": cfg.judge, "by": cfg.by, "of": cfg.of}
        if cfg.flagged_by is not None:
            base["among"] = f"records flagged by '{cfg.flagged_by}'"
        if not known:
            n = table.num_rows  # (without include_excluded, the query left excluded ones out)
            return [metric_row(self.name, "all", None, (None, None), n, 0, 0, n,
                               base, f"no judgments from judge '{cfg.judge}' in this run")]
        category = np.asarray(table.column("category").to_pylist(), dtype=object)
        excluded = excluded_mask(table)
        rows = []
        for label, idx in index_slices(table, [cfg.by]):
            in_slice = category[idx]
            scored = in_slice != None  # noqa: E711 - elementwise comparison on an array
            # excluded records the table kept (include_excluded) are counted, not excluded:
            # n_attempted = n_excluded + n_judged + n_unscored
            n_filtered = int(excluded[idx].sum())
            n_exc = 0 if cfg.include_excluded else n_filtered
            n_scored = int(scored.sum())
            for cat in cats:
                hits = (in_slice[scored] == cat).astype(float)
                lo, hi, method = mean_ci(hits, cfg.n_boot, cfg.seed, cfg.confidence)
                rows.append(metric_row(
                    f"{self.name}.{cat}", label, float(hits.mean()) if n_scored else None,
                    (lo, hi), len(idx), n_exc, n_scored, len(idx) - n_exc - n_scored,
                    {**base, "category": cat, "count": int(hits.sum()),
                     **({"ci_method": method} if method else {}),
                     **({"n_filtered": n_filtered} if cfg.include_excluded else {}),
                     "what": f"share of {label} records whose '{cfg.judge}' {cfg.of} is "
                             f"{cat}"},
                    undefined=f"no record of {label} has a verdict from '{cfg.judge}'"))
        return rows
