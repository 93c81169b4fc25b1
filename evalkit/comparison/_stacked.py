"""Many resamples in one computation, for the metrics whose slices are computed apart from
one another (a rate, a mean, latency percentiles, user-action rates): the resamples of a
block are stacked in one ``records`` table, each record tagged with its resample, and the
metric is computed once with its ``slice_by`` columns crossed with the resample (``_rep``
for slice ``all``, ``_rep_<column>`` holding ``<rep>\\x1f<value>`` for slice
``<column>=<value>``): its row for slice ``_rep_model=3\\x1fgpt`` is its value for slice
``model=gpt`` on resample 3. One DuckDB pass and one metric call per block replace a table
swap and a metric call per resample, which cost most of a two-run report's time.

Only the plugins listed in :data:`STACKABLE`, sliced by text columns, go this way; the
others are recomputed resample by resample (:func:`evalkit.comparison._recompute.values`).
The values are the same either way (tests/comparison/test_stacked.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from evalkit.comparison._recompute import Key, RunTables
from evalkit.results.schemas import METRICS, conform

__all__ = ["STACKABLE", "stackable", "stacked_values"]

# plugins whose rows for one slice depend on that slice's records only
STACKABLE = frozenset({"rate", "mean", "latency", "edit_rate", "bypass_rate"})
_SEP = "\x1f"
_NAMES = frozenset(METRICS.names)
_CELLS = 100_000  # records in one stacked table (a block's resamples × the shared records):
# a run of 100,000 records or more is stacked one resample at a time, as before


def _text_columns(run: RunTables) -> set[str]:
    return {name for name, typ, *_ in run.con.execute("DESCRIBE base_records").fetchall()
            if str(typ).upper() == "VARCHAR"}


def stackable(run: RunTables, metrics: dict[str, Any]) -> list[str]:
    """The metric instances of ``metrics`` that may be computed on stacked resamples."""
    text = _text_columns(run)
    out = []
    for name, plugin in metrics.items():
        slice_by = getattr(getattr(plugin, "config", None), "slice_by", None)
        if run.plugin_of.get(name) in STACKABLE and isinstance(slice_by, list) and \
                all(isinstance(c, str) and c in text for c in slice_by):
            out.append(name)
    return out


def _crossed(plugin: Any) -> Any:
    """``plugin`` again, its slices crossed with the resample."""
    cfg = plugin.config
    slice_by = ["_rep", *(f"_rep_{c}" for c in dict.fromkeys(cfg.slice_by))]
    return type(plugin)(plugin.name, dataclasses.replace(cfg, slice_by=slice_by),
                        getattr(plugin, "ctx", None))


def _use(run: RunTables, block: Any, columns: list[str]) -> None:
    """``records``, ``judgments`` and ``included`` holding every resample of ``block`` (a
    table of record_id, copy, rep), tagged with the resample."""
    run.con.register("sample", block)
    tags = "".join(f', CAST(s.rep AS VARCHAR) || chr(31) || coalesce(CAST(r."{c}" AS '
                   f"VARCHAR), 'null') AS \"_rep_{c}\"" for c in columns)
    run.con.execute(
        "CREATE OR REPLACE TABLE records AS SELECT r.* REPLACE (r.record_id || '#' || "
        "s.copy || '@' || s.rep AS record_id), CAST(s.rep AS VARCHAR) AS _rep" + tags +
        " FROM base_records r JOIN sample s USING (record_id)")
    run.con.execute(
        "CREATE OR REPLACE TABLE judgments AS SELECT j.* REPLACE (j.record_id || '#' || "
        "s.copy || '@' || s.rep AS record_id) FROM base_judgments j "
        "JOIN sample s USING (record_id)")
    run.con.execute("CREATE OR REPLACE VIEW included AS "
                    "SELECT * FROM records WHERE excluded_by IS NULL")
    run.con.unregister("sample")


def _key(metric: str, label: str) -> tuple[Key, int] | None:
    """The (metric, slice) key and the resample of a crossed row; ``None`` for its slice
    ``all`` (every resample at once)."""
    column, eq, value = label.partition("=")
    if not eq:
        return None
    if column == "_rep":
        return (metric, "all"), int(value)
    if column.startswith("_rep_"):
        rep, _, original = value.partition(_SEP)
        return (metric, f"{column[len('_rep_'):]}={original}"), int(rep)
    return None


def _blocks(samples: Iterator[Any], n: int) -> Iterator[Any]:
    """The resamples as tables of at most :data:`_CELLS` records, each row tagged with its
    resample's index (``rep``)."""
    import pyarrow as pa

    size = max(1, _CELLS // max(n, 1))
    batch: list[Any] = []
    for i, sample in enumerate(samples):
        batch.append(sample.append_column("rep", pa.array([i] * sample.num_rows,
                                                           pa.int64())))
        if len(batch) == size:
            yield pa.concat_tables(batch)
            batch = []
    if batch:
        yield pa.concat_tables(batch)


def stacked_values(run: RunTables, metrics: dict[str, Any], samples: Iterator[Any], n: int,
                   count: int, failed: dict[str, str]) -> dict[Key, np.ndarray]:
    """Each (metric, slice) key's value on each of the ``count`` resamples (NaN where the
    metric gave none), for the stackable ``metrics``; a metric that raises goes to
    ``failed``, as on a plain resample."""
    crossed = {name: _crossed(p) for name, p in metrics.items()}
    columns = list(dict.fromkeys(c for p in metrics.values() for c in p.config.slice_by))
    out: dict[Key, np.ndarray] = {}
    for block in _blocks(samples, n):
        _use(run, block, columns)
        for name, plugin in crossed.items():
            if name in failed:
                continue
            try:
                cells = _cells(plugin.compute(run.con), name)
            except Exception as exc:  # (as values() does on a resample)
                failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                continue
            for metric, label, value in cells:
                found = _key(metric, label)
                if found is None:
                    continue
                key, rep = found
                values = out.setdefault(key, np.full(count, np.nan))
                if value is not None:
                    values[rep] = value
    return out


def _cells(result: Any, name: str) -> list[tuple[str, str, Any]]:
    """(metric, slice, value) of each row a metric returned, as :func:`conform` would give
    them. Rows as dicts of plain numbers are read straight: conform also builds every
    other column (the details' JSON text of tens of thousands of crossed rows), most of a
    stacked block's time, for values nobody reads here."""
    if not isinstance(result, list) or not all(
            type(r) is dict and r.keys() <= _NAMES and type(r.get("value")) in _PLAIN
            and isinstance(r.get("slice"), str) and isinstance(r.get("metric", name), str)
            for r in result):
        table = conform(result, METRICS, {"metric": name})
        return [(r["metric"], r["slice"], r["value"])
                for r in table.select(["metric", "slice", "value"]).to_pylist()]
    return [(name if r.get("metric") is None else r["metric"], r["slice"],
             None if r.get("value") is None else float(r["value"])) for r in result]


_PLAIN = (float, int, bool, type(None))
