"""Test helper for the metrics of issue #5: a DuckDB connection with the views a metric gets
(``records``, ``judgments``, ``included``) built from plain rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb

from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import run_connection, write_parquet


def connect(records: Iterable[Mapping[str, Any]],
            judgments: Iterable[Mapping[str, Any]] = ()) -> duckdb.DuckDBPyConnection:
    """Records need ``record_id``; judgments need ``record_id`` and ``judge`` (status
    defaults to ok)."""
    rec = conform([{"run_id": "run", **r} for r in records], RECORDS)
    jud = conform([{"run_id": "run", "status": "ok", "origin": "computed", **j}
                   for j in judgments], JUDGMENTS)
    con = duckdb.connect()
    con.register("records_t", rec)
    con.register("judgments_t", jud)
    con.execute("CREATE VIEW records AS SELECT * FROM records_t")
    con.execute("CREATE VIEW judgments AS SELECT * FROM judgments_t")
    con.execute("CREATE VIEW included AS SELECT * FROM records WHERE excluded_by IS NULL")
    return con


def run_dir_connection(run_dir: Path, records: Iterable[Mapping[str, Any]],
                       judgments: Iterable[Mapping[str, Any]]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection over a run directory (``run_dir``, which gets ``records.parquet``
    and ``judgments/part-00000.parquet``) holding these rows, opened as the runner opens it."""
    write_parquet(conform(list(records), RECORDS), run_dir / "records.parquet")
    (run_dir / "judgments").mkdir()
    write_parquet(conform(list(judgments), JUDGMENTS),
                  run_dir / "judgments" / "part-00000.parquet")
    return run_connection(run_dir)


def rows_by(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Metric rows keyed by (metric, slice)."""
    return {(r["metric"], r["slice"]): r for r in rows}


def by_metric(rows: list[dict[str, Any]], slice_: str = "all") -> dict[str, dict[str, Any]]:
    """Metric rows of one slice keyed by metric name."""
    return {r["metric"]: r for r in rows if r["slice"] == slice_}


def pairs(a: Iterable[Any], b: Iterable[Any] | None = None, human: Iterable[Any] | None = None,
          **record_fields: Iterable[Any]) -> duckdb.DuckDBPyConnection:
    """A run where judge ``A`` scored ``a`` and judge ``B`` scored ``b`` (None: no judgment)
    or records carry human labels ``human``, one record per position."""
    a = list(a)
    b = None if b is None else list(b)
    human = None if human is None else list(human)
    records, judgments = [], []
    extra = {k: list(v) for k, v in record_fields.items()}
    for i, va in enumerate(a):
        rid = f"r{i:04d}"
        rec: dict[str, Any] = {"record_id": rid, **{k: v[i] for k, v in extra.items()}}
        if human is not None:
            rec["human_label"] = None if human[i] is None else str(human[i])
        records.append(rec)
        if va is not None:
            judgments.append({"record_id": rid, "judge": "A", "value": float(va)})
        if b is not None and b[i] is not None:
            judgments.append({"record_id": rid, "judge": "B", "value": float(b[i])})
    return connect(records, judgments)
