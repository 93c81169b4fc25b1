"""The Arrow schemas of every run table (built from :mod:`evalkit.results.columns`); everything
else conforms to them.

Denominators carried by each metric row:

- ``n_attempted``: records in the slice, whatever happened to them;
- ``n_excluded``: of those, records a filter set aside (``records.excluded_by`` not null);
- ``n_judged``: records (or pairs) that produced a usable value for this metric;
- ``n_unscored``: included records the metric could not use (judge error, missing value).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.results.columns import COLUMNS

__all__ = [
    "EXCHANGE_CALLS_LIMIT", "EXCHANGE_TEXT_LIMIT", "JUDGMENTS", "METRICS", "RAW_LIMIT", "RECORDS",
    "TABLES", "bounded_text", "conform", "empty", "json_text", "record_batches",
]

_ARROW = {
    "string": pa.string(),
    "float64": pa.float64(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "list<string>": pa.list_(pa.string()),
}

TABLES: dict[str, pa.Schema] = {
    name: pa.schema([(col, _ARROW[typ]) for col, typ in cols]) for name, cols in COLUMNS.items()
}
RECORDS = TABLES["records"]
JUDGMENTS = TABLES["judgments"]
METRICS = TABLES["metrics"]

RAW_LIMIT = 2000
"""Characters of raw input kept in a reject row."""

EXCHANGE_TEXT_LIMIT = 4000
"""Characters kept of each message sent to a judge model and of each reply, in
``judgments.exchange`` (the rest is cut and the cut counted in the text)."""
EXCHANGE_CALLS_LIMIT = 8
"""Calls of one judgment kept in ``judgments.exchange`` (the count of the others is kept)."""


def bounded_text(text: str | None, limit: int = EXCHANGE_TEXT_LIMIT) -> str | None:
    """``text`` cut to ``limit`` characters, saying how many were cut."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} characters cut]"


def json_text(value: Any) -> str | None:
    """Compact JSON text for a cell (``details``, ``metadata``, an object-valued output);
    strings and ``None`` pass through unchanged."""
    if value is None or type(value) is str:
        return value
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, or nesting past 254 levels
        import json

        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def conform(
    data: pa.Table | pa.RecordBatch | Iterable[Mapping[str, Any]],
    schema: pa.Schema,
    fill: Mapping[str, Any] | None = None,
) -> pa.Table:
    """Return ``data`` as a table of exactly ``schema``: missing columns become null (or the
    constant in ``fill``), extra columns are an error, types are cast safely.

    Accepts a table, a record batch, or rows as dicts (JSON-able ``details``/``metadata``
    values are serialised)."""
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        rows = list(data)
        cols: dict[str, list[Any]] = {}
        for i, row in enumerate(rows):
            for key, value in row.items():
                if key in ("details", "metadata"):
                    value = json_text(value)
                cols.setdefault(key, [None] * i).append(value)
            for col in cols.values():
                if len(col) < i + 1:
                    col.append(None)
        data = pa.table(
            {k: pa.array(v, type=schema.field(k).type) if k in schema.names else v
             for k, v in cols.items()}
        ) if rows else pa.table({})
        num_rows = len(rows)
    else:
        num_rows = data.num_rows
    extra = [n for n in data.schema.names if n not in schema.names]
    if extra:
        raise ValueError(f"columns not in the schema: {extra}; allowed: {schema.names}")
    fill = fill or {}
    arrays = []
    for field in schema:
        if field.name in data.schema.names:
            col = data.column(field.name)
            if col.type != field.type:
                col = col.cast(field.type)
            if field.name in fill and col.null_count:
                col = pc.fill_null(col, pa.scalar(fill[field.name], field.type))
            arrays.append(col)
        elif field.name in fill and fill[field.name] is not None:
            arrays.append(pa.repeat(pa.scalar(fill[field.name], field.type), num_rows))
        else:
            arrays.append(pa.nulls(num_rows, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def empty(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows."""
    return schema.empty_table()


def record_batches(items: Iterable[Any], size: int) -> Iterator[Any]:
    """Rows (dicts) of ``items`` as :data:`RECORDS` tables of ``size`` rows at the most; any
    other item (a reject, imported scores) is passed on where it stands, ahead of the rows
    still waiting for their batch."""
    batch: list[Mapping[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            yield item
            continue
        batch.append(item)
        if len(batch) >= size:
            yield conform(batch, RECORDS)
            batch = []
    if batch:
        yield conform(batch, RECORDS)
