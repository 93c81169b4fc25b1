"""DuckDB over every run under a runs directory, read-only and confined to it."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.errors import QueryError
from evalkit.results.columns import empty_select_sql, sql_literal

if TYPE_CHECKING:
    import duckdb

# where each table lives inside runs/<experiment>/<run_id>/
_FILES = {
    "records": "*/*/records.parquet",
    "judgments": "*/*/judgments/*.parquet",
    "metrics": "*/*/metrics.parquet",
    "alerts": "*/*/alerts.parquet",
    "rejects": "*/*/rejects.parquet",
}

# the flat part of manifest.json, one row per run
RUNS_COLUMNS = {
    "run_id": "VARCHAR",
    "experiment": "VARCHAR",
    "status": "VARCHAR",
    "started_at": "TIMESTAMPTZ",
    "finished_at": "TIMESTAMPTZ",
    "duration_s": "DOUBLE",
    "n_records": "BIGINT",
    "n_excluded": "BIGINT",
    "n_rejects": "BIGINT",
    "n_judgments": "BIGINT",
    "judge_cost_usd": "DOUBLE",
    "overrides": "VARCHAR[]",
    "evalkit_version": "VARCHAR",
    "run_dir": "VARCHAR",
    "config": "JSON",
}


def connect(runs_dir: str | os.PathLike[str] = "runs") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with views ``runs``, ``records``, ``judgments``,
    ``metrics``, ``alerts`` and ``rejects`` over every run under ``runs_dir``.

    The connection can read only ``runs_dir``: file access elsewhere is disabled and the
    setting is locked, so ``read_csv('/etc/passwd')`` or ``COPY ... TO '/tmp/x'`` fail."""
    import duckdb

    root = Path(runs_dir).resolve()
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    con.execute("SET allowed_directories = ?", [[str(root) + os.sep]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    for name, pattern in _FILES.items():
        path = str(root / pattern)
        if glob.glob(path):
            sql = f"SELECT * FROM read_parquet({sql_literal(path)}, union_by_name=true)"
        else:
            sql = empty_select_sql(name)
        con.execute(f"CREATE VIEW {name} AS {sql}")
    manifests = str(root / "*/*/manifest.json")
    cols = ", ".join(f"{k}: {sql_literal(v)}" for k, v in RUNS_COLUMNS.items())
    if glob.glob(manifests):
        sql = f"SELECT * FROM read_json({sql_literal(manifests)}, columns={{{cols}}})"
    else:
        sql = "SELECT " + ", ".join(
            f'CAST(NULL AS {t}) AS "{k}"' for k, t in RUNS_COLUMNS.items()
        ) + " WHERE false"
    con.execute(f"CREATE VIEW runs AS {sql}")
    return con


_READ_ONLY = ("SELECT", "EXPLAIN")


def run_query(con: duckdb.DuckDBPyConnection, sql: str, arrow: bool = False):
    """Run ``sql``, which must be one read-only statement. Returns ``(columns, rows)``, or a
    pyarrow Table when ``arrow`` is true (pyarrow is imported only then)."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"query: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise QueryError(f"query: give exactly one SQL statement (got {len(statements)})")
    kind = statements[0].type.name
    if kind not in _READ_ONLY:
        raise QueryError(f"query: only SELECT queries are allowed here, not {kind}; "
                         "use --format/--out to save a result")
    try:
        rel = con.sql(sql)
        if arrow:
            return rel.to_arrow_table()
        return rel.columns, rel.fetchall()
    except duckdb.PermissionException as exc:
        raise QueryError(
            "query: refused, a query may read only the runs directory "
            f"({str(exc).splitlines()[0]})"
        ) from None
    except duckdb.Error as exc:
        raise QueryError(f"query: {str(exc).splitlines()[0]}") from None
