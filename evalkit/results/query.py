"""DuckDB over every run under a runs directory, read-only and confined to it.

The guarantee rests on DuckDB, not on the statement's text:

The sandbox itself (settings, parser check, limits) is :mod:`evalkit.results.sandbox`,
shared with every SQL text from a config; this module adds the runs' views:

- DuckDB's settings (:func:`connect`): no file access outside the runs directory
  (``enable_external_access`` off, ``allowed_directories`` = the runs directory), no
  extension installed or loaded, no persistent secrets read, no temporary files spilled
  (``temp_directory`` empty), no Python variable scanned, and the configuration locked;
- DuckDB's parser (:func:`check_read_only`): a query is exactly one statement whose parsed
  type is ``SELECT`` (``EXPLAIN``, which runs its statement under ``ANALYZE``, ``PREPARE``,
  ``EXECUTE``, ``CALL``, ``SET``, ``PIVOT``'s hidden ``CREATE TYPE``, ``COPY``, ``ATTACH`` ...
  are other types), and every table function anywhere in its parse tree (CTEs and subqueries
  included) is one of :data:`READ_TABLE_FUNCTIONS`, functions that only read.

Inside the runs directory DuckDB could write as well as read; only a statement of another
type, or a table function that runs SQL or changes state, could ask it to, and both are
refused. :class:`ReadOnlyConnection` is what ``evalkit.connect`` hands to Python: every query
goes through the same check, and results come back as data, never as DuckDB relations (whose
``to_parquet`` and ``query`` would bypass it)."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import QueryError
from evalkit.results.columns import empty_select_sql, sql_literal
from evalkit.results.runfiles import check_table, skipped, type_problem
from evalkit.results.runs import FINISHED, TABLE_FILES, list_runs, table_files
from evalkit.results.sandbox import (
    READ_TABLE_FUNCTIONS,
    Limits,
    QueryResult,
    check_read_only,
    query_error,
    sandboxed_connection,
    time_limit,
)
from evalkit.results.storage import is_remote

if TYPE_CHECKING:
    import duckdb

    from evalkit.results.storage import RemoteRun, RemoteRunsDir

__all__ = [
    "READ_TABLE_FUNCTIONS", "RUNS_COLUMNS", "check_read_only", "connect", "QueryResult",
    "ReadOnlyConnection", "run_query",
]

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
    "sweep_id": "VARCHAR",  # the sweep (evalkit run -m) the run was a job of
    "sweep_job": "BIGINT",  # its job number in that sweep
}


def connect(runs_dir: str | os.PathLike[str] = "runs",
            run: str | os.PathLike[str] | RemoteRun | None = None,
            include_unfinished: bool = False, lazy: bool = False, key: str = "runs_dir",
            limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with views ``runs``, ``records``, ``judgments``,
    ``metrics``, ``alerts`` and ``rejects`` over every run under ``runs_dir`` (or over
    ``run`` only, a run directory under it), ``latest``: the ``runs`` row of the run
    that finished last, and ``labels``: the human labels kept in the runs directory.

    ``runs`` lists every run with its ``status`` (``running``, ``ok``, ``failed``,
    ``interrupted``); the other views hold the rows of finished (``ok``) runs only, unless
    ``include_unfinished``: a killed or failed run's parts are never read as data.

    The connection can read only ``runs_dir``: file access elsewhere is disabled and the
    settings are locked, so ``read_csv('/etc/passwd')`` fails. It is the raw connection:
    run queries through :func:`run_query` (or use :class:`ReadOnlyConnection`), which
    refuses anything but a plain read, ``COPY ... TO`` inside the runs directory too.

    ``lazy``: the Parquet views are made by :func:`run_query` when a query first names them
    (DuckDB reads the footer of each of a view's files to make it: over thousands of runs,
    most of a query's time when every view is made up front).

    ``runs_dir`` may be a URL (``s3://bucket/prefix?...``, see
    :mod:`evalkit.results.storage`; ``run`` is then a run id, ``latest`` or a
    :class:`~evalkit.results.storage.RemoteRun`); ``key`` names it in errors.

    ``limits``: the memory and time a query may take (see :mod:`evalkit.results.sandbox`;
    default from the environment)."""
    limits = limits or Limits.resolve()
    if is_remote(runs_dir):
        return _connect_remote(str(runs_dir), run, include_unfinished, lazy, key, limits)
    root = Path(runs_dir).resolve()
    listed_runs = list_runs(root)
    if run is not None:
        one = root / Path(run).resolve().relative_to(root)
        listed_runs = [(d, status) for d, status in listed_runs if d == one]
    con = sandboxed_connection(allowed_directories=[str(root) + os.sep], limits=limits)
    _LIMITS[con] = limits
    every = [d for d, _ in listed_runs]
    shown = [d for d, status in listed_runs if include_unfinished or status == FINISHED]
    if lazy:
        _PENDING[con] = {name: (shown, root) for name in TABLE_FILES}
    else:
        for name in TABLE_FILES:
            _create_table_view(con, name, shown, root)
    cols = ", ".join(f"{k}: {sql_literal(v)}" for k, v in RUNS_COLUMNS.items())
    if every:
        manifests = ", ".join(sql_literal(str(d / "manifest.json")) for d in every)
        sql = f"SELECT * FROM read_json([{manifests}], columns={{{cols}}})"
        gone = [d for d, status in listed_runs if status == "interrupted"]
        if gone:  # killed runs' manifests still say running: list them as list_runs does
            keys = ", ".join(f"({sql_literal(d.parent.name)}, {sql_literal(d.name)})"
                             for d in gone)
            sql = ("SELECT * REPLACE (CASE WHEN status = 'running' AND (experiment, run_id) "
                   f"IN (VALUES {keys}) THEN 'interrupted' ELSE status END AS status) "
                   f"FROM ({sql})")
    else:
        sql = "SELECT " + ", ".join(
            f'CAST(NULL AS {t}) AS "{k}"' for k, t in RUNS_COLUMNS.items()
        ) + " WHERE false"
    _create_view(con, "runs", sql, root)
    con.execute("CREATE VIEW latest AS SELECT * FROM runs WHERE status = 'ok' "
                "ORDER BY finished_at DESC, run_id DESC LIMIT 1")
    _create_labels_view(con, root)
    return con


LABEL_PARTS = "_labels/part-*.parquet"
"""The labels table's files under a runs directory (:mod:`evalkit.labels`)."""


def _create_labels_view(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """``labels``: every human label under the runs directory. Labels belong to records, not
    to runs, so ``--run`` does not narrow them; join them on ``record_id``."""
    parts = sorted(root.glob(LABEL_PARTS))
    if parts:
        listed = ", ".join(sql_literal(str(p)) for p in parts)
        sql = f"SELECT * FROM read_parquet([{listed}], union_by_name=true)"
    else:
        sql = empty_select_sql("labels")
    _create_view(con, "labels", sql, root)


# the Parquet views a lazy connection has not made yet: name -> (run directories, root), or
# (runs, their store) for a runs directory on object storage
_PENDING: weakref.WeakKeyDictionary[Any, dict[str, tuple[list[Any], Any]]] = (
    weakref.WeakKeyDictionary())


# the local Parquet views a connection made: name -> (run directories, root, their files),
# to make them again when the files changed under it (evalkit compact swapped a run's parts)
_MADE: weakref.WeakKeyDictionary[Any, dict[str, tuple[list[Path], Path, list[Path]]]] = (
    weakref.WeakKeyDictionary())


def _create_table_view(con: duckdb.DuckDBPyConnection, name: str,
                       dirs: list[Path] | list[RemoteRun], root: Path | RemoteRunsDir) -> None:
    if not isinstance(root, Path):  # object storage
        _create_remote_view(con, name, dirs, root)  # type: ignore[arg-type]
        return
    for again in (False, True):
        files = table_files(dirs, name)  # type: ignore[arg-type]
        _MADE.setdefault(con, {})[name] = (dirs, root, files)  # type: ignore[assignment]
        try:
            _union_view(con, name, files, root)
            if not files or type_problem(con.execute(f"DESCRIBE {name}").fetchall(),
                                         name) is None:
                return
        except QueryError as exc:
            if "leads outside the runs directory" in str(exc):
                raise
            if not again and table_files(dirs, name) != files:  # type: ignore[arg-type]
                continue  # a file listed was swapped away meanwhile (evalkit compact)
        # a file that cannot be read with the others (not Parquet, a column of another type):
        # left out, each in a warning line; the other runs' rows are served
        good = []
        for path in files:
            problem = check_table(con, path, name)  # type: ignore[arg-type]
            if problem is None:
                good.append(path)
            else:
                skipped(problem)
        _union_view(con, name, good, root)
        return


def _union_view(con: duckdb.DuckDBPyConnection, name: str, files: list[Path],
                root: Path) -> None:
    if files:
        listed = ", ".join(sql_literal(str(p)) for p in files)
        sql = f"SELECT * FROM read_parquet([{listed}], union_by_name=true)"
    else:
        sql = empty_select_sql(name)
    _create_view(con, name, sql, root)


def _make_pending_views(con: duckdb.DuckDBPyConnection, tree: object) -> None:
    """Make the pending views ``tree`` (a parse tree) names; all of them when it may list
    or read views by other means (a table function, ``SHOW TABLES``, another schema)."""
    pending = _PENDING.get(con)
    if not pending:
        return
    named: set[str] = set()
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "BASE_TABLE" and item.get("schema_name") in ("", "main"):
                named.add(str(item.get("table_name", "")).strip('"').lower())
            elif kind in ("BASE_TABLE", "TABLE_FUNCTION") or (
                    kind == "SHOW_REF" and item.get("show_type") not in ("DESCRIBE", "SUMMARY")):
                named.update(pending)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    for name in sorted(named & pending.keys()):
        _create_table_view(con, name, *pending.pop(name))


# the pyarrow objects behind a remote runs directory's views, by connection: each cursor a
# query runs on is a connection of its own and must have them registered too
_REMOTE_OBJECTS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _connect_remote(url: str, run: object, include_unfinished: bool, lazy: bool,
                    key: str, limits: Limits) -> duckdb.DuckDBPyConnection:
    """:func:`connect` over a runs directory on object storage. DuckDB scans pyarrow datasets
    over the runs' Parquet objects (columns and filters pushed down: only what a query
    needs is fetched), registered before the configuration is locked; file access is off
    altogether, so a query reads these views and nothing else, and cannot write."""
    import json

    import pyarrow as pa

    from evalkit.results.storage import RemoteRun, open_runs_dir

    remote = open_runs_dir(url, key)
    listed = remote.list_runs()
    if run is not None:
        chosen = run if isinstance(run, RemoteRun) else remote.find(
            listed, str(run), "query", unfinished=include_unfinished)
        listed = [r for r in listed if r.path == chosen.path]
    objects: dict[str, Any] = {}
    shown = [r for r in listed if include_unfinished or r.status == FINISHED]
    if listed:
        # the manifests' flat part, typed as read_json types it for a local runs directory
        objects["_evalkit_manifests"] = pa.table({
            "manifest": [json.dumps(r.manifest, default=str) for r in listed],
            "status": [r.status for r in listed]})
        structure = json.dumps(RUNS_COLUMNS)
        cols = ", ".join("status AS status" if k == "status" else f'm."{k}" AS "{k}"'
                         for k in RUNS_COLUMNS)
        sql = (f"SELECT {cols} FROM (SELECT json_transform(manifest, {sql_literal(structure)}) "
               "AS m, status FROM _evalkit_manifests)")
    else:
        sql = "SELECT " + ", ".join(
            f'CAST(NULL AS {t}) AS "{k}"' for k, t in RUNS_COLUMNS.items()
        ) + " WHERE false"

    def prepare(con: duckdb.DuckDBPyConnection) -> None:
        for name, obj in objects.items():
            con.register(name, obj)
        con.execute(f"CREATE VIEW runs AS {sql}")
        con.execute("CREATE VIEW latest AS SELECT * FROM runs WHERE status = 'ok' "
                    "ORDER BY finished_at DESC, run_id DESC LIMIT 1")
        con.execute(f"CREATE VIEW labels AS {empty_select_sql('labels')}")  # (local only)

    # (no directory is allowed at all)
    con = sandboxed_connection(limits=limits, prepare=prepare)
    _REMOTE_OBJECTS[con] = objects
    _LIMITS[con] = limits
    if lazy:  # (a dataset reads the footer of every object in it when it is made)
        _PENDING[con] = {name: (shown, remote) for name in TABLE_FILES}
    else:
        for name in TABLE_FILES:
            _create_remote_view(con, name, shown, remote)
    return con


def _create_remote_view(con: duckdb.DuckDBPyConnection, name: str, runs: list[RemoteRun],
                        remote: RemoteRunsDir) -> None:
    files = [f for r in runs for f in r.table_files(TABLE_FILES[name])]
    if not files:
        con.execute(f"CREATE VIEW {name} AS {empty_select_sql(name)}")
        return
    dataset = remote.dataset(files, name)
    _REMOTE_OBJECTS.setdefault(con, {})[f"_evalkit_{name}"] = dataset
    con.register(f"_evalkit_{name}", dataset)
    con.execute(f"CREATE VIEW {name} AS SELECT * FROM _evalkit_{name}")


def _create_view(con: duckdb.DuckDBPyConnection, name: str, sql: str, root: Path) -> None:
    """``CREATE VIEW name AS sql``; a run file DuckDB may not read (a link that leaves the
    runs directory: DuckDB resolves links and refuses) is a one-line error."""
    import duckdb

    try:
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    except duckdb.PermissionException as exc:
        where = str(exc).splitlines()[0].partition('"')[2].partition('"')[0] or str(root)
        raise QueryError(f"query: cannot read {where}: it leads outside the runs directory "
                         f"{root} (a symbolic link?); link the runs directory itself, or "
                         "pass --runs-dir where the runs really are") from None
    except duckdb.Error as exc:  # a file that is not Parquet, a manifest that is not JSON
        raise QueryError(f"query: {name}: {str(exc).splitlines()[0]}") from None


def run_query(con: duckdb.DuckDBPyConnection | ReadOnlyConnection, sql: str,
              arrow: bool = False, params: object = None, stream: bool = False):
    """Run ``sql``, which must pass :func:`check_read_only`. Returns ``(columns, rows)``, or
    a pyarrow Table when ``arrow`` is true (pyarrow is imported only then). With ``stream``,
    ``rows`` is an iterator read in chunks (a large result is never held whole)."""
    result = _execute(con, sql, params, save_hint=True)
    if arrow:
        return result.arrow()
    return result.columns, (result.rows() if stream else result.fetchall())


def _remake_changed_views(con: duckdb.DuckDBPyConnection) -> bool:
    """Make again the local views whose runs' files are no longer those they list; whether
    any was."""
    changed = [(name, dirs, root) for name, (dirs, root, files) in _MADE.get(con, {}).items()
               if table_files(dirs, name) != files]
    for name, dirs, root in changed:
        con.execute(f"DROP VIEW IF EXISTS {name}")
        _create_table_view(con, name, dirs, root)
    return bool(changed)


# each connection's limits (memory is DuckDB's setting; time is enforced per query)
_LIMITS: weakref.WeakKeyDictionary[Any, Limits] = weakref.WeakKeyDictionary()


def _execute(con: duckdb.DuckDBPyConnection | ReadOnlyConnection, sql: str,
             params: object, save_hint: bool = False) -> QueryResult:
    """``save_hint``: a refused write names the command line's ``--format/--out`` (only
    ``evalkit query`` has them; Python code saves a result itself)."""
    import duckdb

    if isinstance(con, ReadOnlyConnection):
        con = con._con
    _make_pending_views(con, check_read_only(con, sql, save_hint=save_hint))
    limits = _LIMITS.get(con) or Limits.resolve()
    cursors: list[duckdb.DuckDBPyConnection] = []
    try:
        with time_limit(limits) as watch:
            cursor = watch(con.cursor())
            cursors.append(cursor)
            for name, obj in _REMOTE_OBJECTS.get(con, {}).items():
                cursor.register(name, obj)
            try:
                cursor.execute(sql, params)
            except duckdb.CatalogException:
                if not _PENDING.get(con):
                    raise
                # a name the parse tree did not show (a view read by other means): make them
                # all
                for name, where in sorted(_PENDING.pop(con).items()):
                    _create_table_view(con, name, *where)
                for name, obj in _REMOTE_OBJECTS.get(con, {}).items():
                    cursor.register(name, obj)
                cursor.execute(sql, params)
            except (duckdb.IOException, duckdb.InvalidInputException,
                    duckdb.InternalException):
                # a run's files changed since the views listed them (evalkit compact swapped
                # its judgment parts for one file): list them again and run the query again
                if not _remake_changed_views(con):
                    raise
                cursor.close()
                cursor = watch(con.cursor())
                cursors.append(cursor)
                cursor.execute(sql, params)
    except duckdb.Error as exc:
        for each in cursors:
            each.close()
        raise query_error(exc, limits) from None
    return QueryResult(cursor)


class ReadOnlyConnection:
    """What ``evalkit.connect`` returns: the views of :func:`connect`, queried only through
    :func:`check_read_only`. ``con.sql("SELECT ...").df()`` works as with DuckDB; a statement
    that is not a plain read raises :class:`~evalkit.errors.QueryError`."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def sql(self, query: str, params: object = None) -> QueryResult:
        """Run one read-only query (``params`` fill its ``?`` or ``$name`` placeholders)."""
        return _execute(self, query, params)

    execute = query = sql

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> ReadOnlyConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
