"""Per-record signals for metrics: a number per record read from a record column or from a
judge's judgments, with the reason whenever a record has no usable number.

A signal is named by a short spec, the same in every metric config:

- ``confidence``, ``outcome``, ``human_label``: a record column;
- ``judge:NAME``: the ``value`` of judge (or imported score) ``NAME``;
- ``judge:NAME:passed`` / ``judge:NAME:label``: that judgment's ``passed`` or ``label``.

Text (labels, outcomes, booleans as ``true``/``false``) becomes a number through a map
(``{success: 1, failure: 0}``); text that is not in the map is unusable, never a default
score. A threshold turns numbers into 0/1 (1 when ``value > threshold``, or ``>=`` with
``flag_at: ">="``; see :data:`evalkit.checks.DEFAULT_FLAG_AT`). Only judgments
with ``status='ok'`` count; errors and skips are unusable and counted."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.checks import DEFAULT_FLAG_AT
from evalkit.metrics._stats import (
    SLICEABLE,
    Bounds,
    check_slice_by,
    mean_ci,
    mean_ci_open,
    mean_of,
    slice_sql,
    value_groups,
)
from evalkit.paths import value_at
from evalkit.results.schemas import RECORDS

JUDGMENT_FIELDS = ("value", "passed", "label")
_RECORD_COLUMNS = [f.name for f in RECORDS]


@dataclass(frozen=True)
class SliceConfig:
    slice_by: list[str] = field(default_factory=list)  # record columns to slice by, e.g. [model]
    n_boot: int = 1000  # bootstrap resamples for the 95% CI (0: no CI)
    seed: int = 0  # bootstrap seed
    confidence: float = 0.95  # CI level

    def validate(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence: {self.confidence} is not within (0, 1)")
        if self.n_boot < 0:
            raise ValueError("n_boot: must be 0 (no CI) or more")
        check_slice_by(list(self.slice_by))


@dataclass(frozen=True)
class SignalSpec:
    """A parsed signal spec: a record ``column`` or a ``judge`` and the ``field`` read."""

    column: str | None = None
    judge: str | None = None
    field: str = "value"

    def describe(self) -> str:
        return (f"record column '{self.column}'" if self.column
                else f"judge '{self.judge}' {self.field}")


def parse_spec(spec: str, key: str) -> SignalSpec:
    """Parse ``spec`` (see the module docstring); ``key`` names the config key in errors."""
    if not spec:
        raise ValueError(f"{key}: empty; give a record column (e.g. confidence) or "
                         "judge:NAME[:value|passed|label]")
    if spec.startswith("judge:"):
        rest = spec[len("judge:"):]
        name, sep, fld = rest.rpartition(":")
        if not sep or fld not in JUDGMENT_FIELDS:
            name, fld = rest, "value"
        if not name:
            raise ValueError(f"{key}: '{spec}' names no judge; write judge:NAME")
        return SignalSpec(judge=name, field=fld)
    if spec not in _RECORD_COLUMNS or spec not in SLICEABLE:
        raise ValueError(f"{key}: '{spec}' is not a scalar record column nor judge:NAME; "
                         f"columns: {', '.join(SLICEABLE)}")
    return SignalSpec(column=spec)


def check_spec(spec: str | None, key: str, required: bool = True) -> None:
    """For a Config's ``validate``: ``spec`` must parse (or be null when not ``required``)."""
    if spec is None:
        if required:
            raise ValueError(f"{key}: required; give a record column or judge:NAME")
        return
    parse_spec(spec, key)


def above(values: Any, threshold: float, flag_at: str) -> Any:
    """Where ``values`` (numpy) is past ``threshold``: ``>`` or ``>=`` as ``flag_at`` says.
    NaN is never past."""
    return values > threshold if flag_at == ">" else values >= threshold


def to_number(raw: Any, mapping: Mapping[str, float], threshold: float | None,
              flag_at: str = DEFAULT_FLAG_AT) -> tuple[float | None, str | None]:
    """``(number, None)`` or ``(None, why it is unusable)`` for one raw cell: the map first
    (on the cell's text; booleans read ``true``/``false``, matched case-insensitively), then
    booleans as 1/0 and numbers (or numeric text) as themselves."""
    if raw is None:
        return None, "missing"
    key = str(raw).lower() if isinstance(raw, bool) else str(raw)
    hit = None
    if mapping:
        hit = mapping.get(key)
        if hit is None and isinstance(raw, float) and raw.is_integer():
            hit = mapping.get(str(int(raw)))
        if hit is None:
            folded = key.strip().lower()
            hit = next((v for k, v in mapping.items() if k.strip().lower() == folded), None)
    if hit is not None:
        number = float(hit)
    elif isinstance(raw, bool):
        number = 1.0 if raw else 0.0
    elif isinstance(raw, (int, float)):
        number = float(raw)
    else:
        try:
            number = float(key)
        except ValueError:
            known = f" (map: {', '.join(mapping)})" if mapping else ""
            return None, f"{key[:40]!r} is not in the map and not a number{known}"
    if math.isnan(number) or math.isinf(number):
        return None, f"not finite ({number})"
    if threshold is not None:
        number = 1.0 if above(number, threshold, flag_at) else 0.0
    return number, None


def judgment_join(con: Any, judge: str, fields: list[str], alias: str,
                  pick: bool | None = None) -> tuple[str, list[Any]]:
    """``LEFT JOIN`` SQL (and its parameters) adding judge ``judge``'s ``status``, ``error``
    and ``fields`` as ``alias``: one row per record, so a judge that left several judgments
    for a record (a rerun, an imported and a computed copy) contributes its ok one first,
    then a computed one before an imported one, then the least by the fields joined (so the
    pick does not depend on the order the copies were written in), every field from that
    row. Picking needs a sort (a third of the time at 1M rows) that the
    usual case, one judgment per record, does without: ``pick=None`` checks for duplicates
    first, ``False`` joins the judgments as they are (see :func:`per_record`), ``True``
    picks."""
    cols = ", ".join(f'"{f}"' for f in dict.fromkeys(["status", "error", *fields]))
    if pick is None:
        (dups,) = con.execute("SELECT count(*) - count(DISTINCT record_id) FROM judgments "
                              "WHERE judge = ?", [judge]).fetchone()
        pick = bool(dups)
    if not pick:
        return (f"LEFT JOIN (SELECT record_id, {cols} FROM judgments WHERE judge = ?) {alias} "
                "USING (record_id)", [judge])
    # ties broken by every field joined: which copy counts is a function of the copies, not
    # of the order they were written in (a merge, a resume, a shuffled import gave another
    # mean and interval when two ok copies disagreed); evalkit's own before an imported one
    ties = ", ".join(f'"{f}" NULLS LAST' for f in dict.fromkeys(["status", "error", *fields]))
    return (f"LEFT JOIN (SELECT DISTINCT ON (record_id) record_id, {cols} FROM judgments "
            "WHERE judge = ? ORDER BY record_id, CASE status WHEN 'ok' THEN 0 "
            "WHEN 'error' THEN 1 ELSE 2 END, CASE origin WHEN 'imported' THEN 1 ELSE 0 END, "
            f"{ties}) {alias} USING (record_id)", [judge])


def per_record(con: Any, query: Callable[[bool], tuple[str, list[Any]]]) -> pa.Table:
    """The result of ``query(pick)``, a select over every record (no ``WHERE``) with
    :func:`judgment_join` joins. The joins are first made as the judgments are: when the
    result has one row per record, no record had two judgments from a joined judge (the
    usual case, and no duplicate check nor sort was needed); else the query runs again
    picking one judgment per record."""
    sql, params = query(False)
    table = con.execute(sql, params).to_arrow_table()
    (n,) = con.execute("SELECT count(*) FROM records").fetchone()
    if table.num_rows == n:
        return table
    sql, params = query(True)
    return con.execute(sql, params).to_arrow_table()


def fetch(con: Any, specs: Mapping[str, SignalSpec], columns: list[str],
          judge_fields: Mapping[str, list[str]] | None = None) -> pa.Table:
    """One row per record: ``record_id``, ``excluded_by``, the record ``columns`` asked for,
    and for each signal ``name`` the raw cell (``name``) and, for judges, the judgment
    ``status`` (``name__status``), ``error`` and any ``judge_fields[name]``."""

    def query(pick: bool) -> tuple[str, list[Any]]:
        select = ["r.record_id", "r.excluded_by"]
        select += [slice_sql(c, "r") for c in dict.fromkeys(columns)
                   if c not in ("record_id", "excluded_by")]
        joins: list[str] = []
        params: list[Any] = []
        for i, (name, spec) in enumerate(specs.items()):
            if spec.column:
                select.append(f'r."{spec.column}" AS "{name}"')
                continue
            alias = f"j{i}"
            extra = list((judge_fields or {}).get(name, []))
            sql, p = judgment_join(con, spec.judge or "", [spec.field, *extra], alias, pick)
            joins.append(sql)
            params += p
            select += [f'{alias}."{spec.field}" AS "{name}"',
                       f'{alias}.status AS "{name}__status"',
                       f'{alias}.error AS "{name}__error"']
            select += [f'{alias}."{f}" AS "{name}__{f}"' for f in extra]
        return (f"SELECT {', '.join(select)} FROM records r {' '.join(joins)} "
                "ORDER BY r.record_id", params)

    return per_record(con, query)


def numbers(table: pa.Table, name: str, spec: SignalSpec, mapping: Mapping[str, float],
            threshold: float | None, flag_at: str = DEFAULT_FLAG_AT
            ) -> tuple[np.ndarray, list[str | None]]:
    """The signal ``name`` of ``table`` (from :func:`fetch`) as floats (NaN when unusable)
    and, per record, why it is unusable (None when usable)."""
    raw = table.column(name).to_pylist()
    status = table.column(f"{name}__status").to_pylist() if spec.judge else None
    out = np.full(len(raw), np.nan)
    why: list[str | None] = [None] * len(raw)
    for i, cell in enumerate(raw):
        if status is not None and status[i] != "ok":
            why[i] = (f"no judgment from '{spec.judge}'" if status[i] is None
                      else f"judgment status {status[i]}")
            continue
        number, reason = to_number(cell, mapping, threshold, flag_at)
        if number is None:
            why[i] = f"{spec.describe()} {reason}"
        else:
            out[i] = number
    return out, why


def reasons(why: list[str | None], keep: np.ndarray | None = None) -> dict[str, int]:
    """How many records each unusable-reason accounts for (within ``keep``)."""
    items = why if keep is None else [w for w, k in zip(why, keep, strict=True) if k]
    return dict(Counter(w for w in items if w is not None).most_common())


def judge_known(table: pa.Table, name: str, spec: SignalSpec) -> bool:
    """Whether judge signal ``name`` of ``table`` (from :func:`fetch`) found any judgment
    (always True for a column, and for a run without records)."""
    if spec.column or not table.num_rows:
        return True
    return table.column(f"{name}__status").null_count < table.num_rows


def metric_row(metric: str, label: str, value: float | None, ci: tuple[Any, Any],
               n_attempted: int, n_excluded: int, n_judged: int, n_unscored: int,
               details: dict[str, Any], undefined: str | None = None) -> dict[str, Any]:
    """One metric row; an undefined ``value`` is null with ``details['undefined']`` saying
    why (never NaN, never 0). A ``ci`` from a bootstrap (a
    :class:`~evalkit.metrics._stats.Bounds`) puts the Monte-Carlo error of its bounds in
    ``details['mc_error']``."""
    if value is not None and isinstance(value, float) and math.isnan(value):
        value = None
    elif value is not None and not math.isfinite(value):  # an overflow: no inf prints
        undefined = f"the value is not a finite float ({value}): beyond the float range"
        value = None
    if value is not None and not all(b is None or math.isfinite(b) for b in ci):
        details = {**details, "ci_open": "a bound is not a finite float (beyond the float "
                   "range): left open"}
        ci = Bounds(tuple(b if b is None or math.isfinite(b) else None for b in ci),
                    getattr(ci, "mc_error", None))
    if value is None:
        details = {**details, "undefined": undefined or details.get("undefined")
                   or "no usable records in this slice"}
        ci = (None, None)
    mc = getattr(ci, "mc_error", None)
    if mc is not None and math.isfinite(mc) and (ci[0] is not None or ci[1] is not None):
        details = {**details, "mc_error": mc}  # a bootstrap's bounds: what a seed moves
    return {"metric": metric, "slice": label, "value": value, "ci_low": ci[0],
            "ci_high": ci[1], "n_attempted": n_attempted, "n_excluded": n_excluded,
            "n_judged": n_judged, "n_unscored": n_unscored, "details": details}


def index_slices(table: pa.Table, slice_by: list[str]) -> list[tuple[str, np.ndarray]]:
    """``slices`` as row-index arrays into ``table`` (so per-record numpy arrays can be
    sliced alongside): ``("all", every row)``, then ``("col=value", rows)`` per value."""
    out = [("all", np.arange(table.num_rows))]
    for col in slice_by:
        out += [(f"{col}={'null' if value is None else value}", idx)
                for value, idx in value_groups(table.column(col))]
    return out


def row_counts(idx: np.ndarray, excluded: np.ndarray, considered: np.ndarray,
               used: np.ndarray) -> dict[str, int]:
    """A row's denominators, which always add up (``n_attempted = n_excluded + n_judged +
    n_unscored``): of the slice's records ``idx``, the row ``considered`` some (all, or the
    included ones) and could use ``used``. ``n_excluded`` is what the filters kept out of
    *this row*: 0 for a row that counts excluded records too (``.raw``, ``include_excluded``),
    which then says in ``details.n_filtered`` how many of its records a filter set aside."""
    return {"n_attempted": len(idx), "n_excluded": len(idx) - len(considered),
            "n_judged": len(used), "n_unscored": len(considered) - len(used)}


def excluded_mask(table: pa.Table) -> np.ndarray:
    """True where a filter set the record aside."""
    return np.asarray(table.column("excluded_by").is_valid().to_numpy(zero_copy_only=False),
                      dtype=bool)



def mean_row(metric: str, label: str, idx: np.ndarray, values: np.ndarray,
             excluded: np.ndarray, cfg: SliceConfig, details: dict[str, Any],
             include_excluded: bool = False, undefined: str | None = None) -> dict[str, Any]:
    """A row for the mean of per-record ``values`` (NaN: unusable) over the records ``idx``
    of a slice: excluded records are left out unless ``include_excluded``; unusable ones
    are counted as unscored. ``undefined`` says why when no record is usable."""
    considered = idx if include_excluded else idx[~excluded[idx]]
    usable = considered[~np.isnan(values[considered])]
    v = np.sort(values[usable])  # the mean's bits and resamples: a function of the values
    found = mean_ci(v, cfg.n_boot, cfg.seed, cfg.confidence)
    method = found[2]
    if method is not None:
        details = {**details, "ci_method": method}
    else:  # a value without an interval says why
        details = {**details, **mean_ci_open(len(v), cfg.n_boot)}
    if include_excluded:
        details = {**details, "n_filtered": int(excluded[idx].sum())}
    return metric_row(metric, label, mean_of(v) if len(v) else None,
                      found.interval,
                      **row_counts(idx, excluded, considered, usable), details=details,
                      undefined=undefined)


def metadata_value(metadata: str | None, path: str) -> Any:
    """The value at dotted ``path`` (``metadata.a.b``, first part ``metadata``) of a record's
    metadata JSON, or None."""
    return value_at(metadata, path.split(".", 1)[1]) if "." in path else None


def passage_ids(context: list[str] | None, metadata: str | None, how: str) -> set[str] | None:
    """The ids of a record's retrieved passages: ``position`` (1-based indices into
    ``context``) or the list at ``metadata.<path>``; None when that is not a list."""
    if how == "position":
        return {str(i) for i in range(1, len(context or []) + 1)}
    ids = metadata_value(metadata, how)
    return {str(x) for x in ids} if isinstance(ids, list) else None
