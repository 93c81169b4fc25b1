"""The per-record view of one judge's verdicts that ``mean`` and ``rate`` summarise: raw (every
record with a usable score) beside filtered (included records only), and what the filters
took out. Loading, slicing and rows come from :mod:`evalkit.metrics._signals`, as for the
other metrics; what is particular here is the raw / filtered / filter-effect triple."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._signals import (
    SliceConfig,
    excluded_mask,
    index_slices,
    judgment_join,
    mean_row,
    metric_row,
    per_record,
    value_groups,
)
from evalkit.metrics._stats import slice_sql
from evalkit.plugin import Produces


@dataclass(frozen=True)
class JudgeMetricConfig(SliceConfig):
    judge: str = "???"  # the judge instance (or imported score name) to summarise
    raw: bool = True  # also report over all records (before filters), and the difference


def judged_table(con: Any, judge: str, slice_by: list[str]) -> pa.Table:
    """One row per record: ``excluded_by``, slice columns, and the judge's ``value``,
    ``passed``, ``label`` and ``status`` (null when the judge left no judgment). Metrics of
    one connection that summarise the same judge by the same slices (a rate and a mean)
    share one join.

    The join is cached under the catalog versions of the relations it reads
    (:func:`table_versions`), not under the connection alone: a connection whose
    ``records`` or ``judgments`` are replaced (``evalkit compare`` puts each bootstrap
    resample into the same connection) gets a new key, so no cache entry can hand one
    resample the table of another."""
    key = (table_versions(con), judge, tuple(slice_by))
    cached = _JUDGED.setdefault(con, {})
    if key not in cached:
        for stale in [k for k in cached if k[0] != key[0]]:
            del cached[stale]  # the tables it was joined from are gone
        cached[key] = _load(con, judge, slice_by)
    return cached[key]


JUDGED_FROM = ("records", "judgments")
"""The relations a judged table is joined from."""


def table_versions(con: Any) -> tuple[tuple[str, str, int], ...]:
    """``(name, kind, catalog oid)`` of each table or view named in :data:`JUDGED_FROM`, as
    the connection's catalog holds them now. DuckDB gives a relation a new oid whenever it is
    created or replaced, so the versions change whenever the data a judged table was joined
    from is swapped for other data."""
    names = ", ".join(f"'{n}'" for n in JUDGED_FROM)
    rows = con.execute(
        f"SELECT table_name, 'table', table_oid FROM duckdb_tables() "
        f"WHERE table_name IN ({names}) UNION ALL "
        f"SELECT view_name, 'view', view_oid FROM duckdb_views() "
        f"WHERE view_name IN ({names})").fetchall()
    return tuple(sorted((str(n), str(k), int(o)) for n, k, o in rows))


def _load(con: Any, judge: str, slice_by: list[str]) -> pa.Table:
    cols = ", ".join(slice_sql(c, "r") for c in dict.fromkeys(["excluded_by", *slice_by]))
    # the runner writes a computed judge's judgments in record order, one per record (the
    # judge contract, evalkit.plugin.Judge, enforced in runner.judging): then they line up
    # with the records by position, which costs a third of a join on record_id. Imported
    # scores follow no such rule, so it is checked on every row first, by a count (handing
    # the check's column to Arrow beside the table cost a third more than the count)
    positional = ("FROM records r POSITIONAL JOIN (SELECT record_id, value, passed, label, "
                  "status FROM judgments WHERE judge = ?) j")
    (misaligned,) = con.execute(
        f"SELECT count(*) FILTER (WHERE r.record_id IS DISTINCT FROM j.record_id) {positional}",
        [judge]).fetchone()
    if not misaligned:  # (a judgment more or fewer than records leaves a row with a null id)
        return con.execute(f"SELECT {cols}, j.value, j.passed, j.label, j.status {positional}",
                           [judge]).to_arrow_table()

    def query(pick: bool) -> tuple[str, list[Any]]:
        join, params = judgment_join(con, judge, ["value", "passed", "label"], "j", pick)
        return f"SELECT {cols}, j.value, j.passed, j.label, j.status FROM records r {join}", \
            params

    return per_record(con, query)


# connection -> (table versions, judge, slice columns) -> judged table; an entry goes with
# its connection, and with the tables it was joined from
_JUDGED: WeakKeyDictionary[Any, dict[tuple[Any, str, tuple[str, ...]], pa.Table]] = \
    WeakKeyDictionary()


def judge_metric_rows(con: Any, cfg: JudgeMetricConfig, name: str,
                      score: Callable[[pa.Table], pa.Array], what: str) -> list[dict[str, Any]]:
    """Rows of a per-record statistic (``score`` maps the judged table to floats, null when
    unusable): filtered (``name``), raw (``name.raw``) and the filters' effect
    (``name.filter_effect`` = raw − filtered, with a breakdown by filter)."""
    table = judged_table(con, cfg.judge, list(cfg.slice_by))
    values = np.asarray(score(table).to_numpy(zero_copy_only=False), dtype=float)
    excluded = excluded_mask(table)
    by_filter_rows = [(f, idx) for f, idx in value_groups(table.column("excluded_by"))
                      if f is not None]
    undefined = undefined_reason(table, cfg.judge)
    rows: list[dict[str, Any]] = []
    for label, idx in index_slices(table, list(cfg.slice_by)):
        filt = mean_row(name, label, idx, values, excluded, cfg, {"what": what},
                        undefined=undefined)
        rows.append(filt)
        if not cfg.raw:
            continue
        raw = mean_row(f"{name}.raw", label, idx, values, excluded, cfg,
                       {"what": what + ", over all records before filters"},
                       include_excluded=True, undefined=undefined)
        n_set_aside = filt["n_excluded"]
        if n_set_aside and raw["n_judged"] == filt["n_judged"] and filt["value"] is not None:
            # the judges evalkit runs skip excluded records: a "raw" value would be the
            # filtered one again, which is not a number before filters
            raw = metric_row(raw["metric"], label, None, (None, None), raw["n_attempted"],
                             raw["n_excluded"], raw["n_judged"], raw["n_unscored"],
                             {k: v for k, v in raw["details"].items()
                              if k not in ("ci_method", "mc_error")},
                             undefined=f"judge '{cfg.judge}' scored none of the "
                             f"{n_set_aside} record(s) the filters set aside (the judges "
                             "evalkit runs skip excluded records), so there is no value "
                             "before filters")
        rows.append(raw)
        by_filter = {}
        in_slice = np.zeros(len(values), dtype=bool)
        in_slice[idx] = True
        for f, rows_of_f in by_filter_rows:
            mine = rows_of_f[in_slice[rows_of_f]]
            if not len(mine):
                continue
            vals = values[mine][~np.isnan(values[mine])]
            by_filter[f] = {"n_excluded": len(mine), "n_scored": len(vals),
                            "mean": float(vals.mean()) if len(vals) else None}
        effect = None
        if raw["value"] is not None and filt["value"] is not None:
            effect = raw["value"] - filt["value"]
        why = raw["details"].get("undefined") or filt["details"].get("undefined")
        # the counts are the filtered row's (the records the filters left in); the raw
        # row's usable records are in details
        rows.append(metric_row(
            f"{name}.filter_effect", label, effect, (None, None), filt["n_attempted"],
            filt["n_excluded"], filt["n_judged"], filt["n_unscored"],
            {"what": "raw minus filtered: how much the filters moved the number",
             "by_filter": by_filter, "n_judged_raw": raw["n_judged"]},
            undefined=f"no raw or no filtered value: {why}"))
    return rows


def undefined_reason(table: pa.Table, judge: str) -> str:
    """Why a statistic of ``judge``'s judgments in ``table`` (a judged table) would have no
    value: no judgments at all, every judgment an error (say so: a metric of nothing but
    errors must not read as a metric of nothing), or none scored in the slice."""
    status = table.column("status")
    if status.null_count == table.num_rows:
        return f"no judgments from judge '{judge}' in this run"
    counts = {row["values"]: row["counts"] for row in pc.value_counts(status).to_pylist()}
    if not counts.get("ok") and counts.get("error"):
        return (f"every judgment from judge '{judge}' is an error ({counts['error']}; see "
                "judgments.error and error_cause)")
    return "no scored records in this slice"


def judged_cursor_group(config: Any) -> tuple[str, ...] | None:
    """A judge metric's cursor group: metrics of one judge and slices share a cursor, hence
    one judged table (:func:`judged_table`); ``None`` for a metric of no judge."""
    if config.judge is None:
        return None
    return ("judged", config.judge, *config.slice_by)


def value_produces(name: str, config: JudgeMetricConfig) -> Produces:
    """What a one-value judge metric writes: its value, and with ``raw`` the raw one and the
    filters' effect."""
    extra = (f"{name}.raw", f"{name}.filter_effect") if config.raw else ()
    return Produces((name, *extra), slice_by=tuple(config.slice_by))
