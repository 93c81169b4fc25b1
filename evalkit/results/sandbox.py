"""The one sandbox for SQL text evalkit did not write: ``evalkit query``, ``evalkit.connect``
and every SQL text from a config (the ``sql`` filter's predicate, ``state_check``'s query, a
third-party plugin's, through :func:`evalkit.plugin.sql_connection`).

The guarantee rests on DuckDB, not on the text:

- DuckDB's settings (:func:`sandboxed_connection`): file access off except the directories
  (or the one database file) a caller needs, no extension installed or loaded, no persistent
  secret read, nothing spilled to disk, no Python variable scanned, a memory limit, and the
  configuration locked so no statement can change any of it;
- DuckDB's parser (:func:`check_read_only`, :func:`check_expression`): a query is exactly
  one statement typed ``SELECT`` whose table functions only read; an expression is parsed
  as one expression and never pasted into a larger statement;
- a time limit (:func:`time_limit`) that interrupts the connection.

The limits are settings: ``EVALKIT_QUERY_MEMORY_LIMIT`` (DuckDB's syntax, ``2GB``; default
half the machine's memory, at most 4 GB) and ``EVALKIT_QUERY_TIMEOUT`` (seconds; default
300); ``evalkit query --memory-limit/--timeout`` and ``evalkit.connect(memory_limit=,
timeout=)`` set them for one call."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalkit.errors import QueryError
from evalkit.results.columns import sql_literal

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "MEMORY_ENV", "READ_TABLE_FUNCTIONS", "SETTINGS", "TIMEOUT_ENV", "ConfigSql", "Limits",
    "QueryResult", "check_expression", "check_identifier", "check_read_only", "query_error",
    "quote_identifier", "sandboxed_connection", "time_limit",
]

MEMORY_ENV = "EVALKIT_QUERY_MEMORY_LIMIT"
TIMEOUT_ENV = "EVALKIT_QUERY_TIMEOUT"
_DEFAULT_TIMEOUT_S = 300.0
_MAX_DEFAULT_MEMORY = 4 << 30
_MEMORY = re.compile(r"(?i)\s*\d+(\.\d+)?\s*(b|kb|kib|mb|mib|gb|gib|tb|tib)\s*")

# set when the connection is made, before the configuration is locked
SETTINGS = {
    "autoinstall_known_extensions": False,  # no extension is downloaded ...
    "autoload_known_extensions": False,  # ... nor loaded because a query names it
    "allow_community_extensions": False,
    "allow_persistent_secrets": False,  # ~/.duckdb/stored_secrets is never read
    "temp_directory": "",  # nothing spills to disk (a large query fails instead)
    "python_enable_replacements": False,  # FROM name never reads a Python variable
}

READ_TABLE_FUNCTIONS = frozenset({
    # files (inside the allowed directories: the settings refuse any other path)
    "read_parquet", "parquet_scan", "parquet_metadata", "parquet_schema",
    "parquet_file_metadata", "parquet_kv_metadata", "parquet_full_metadata",
    "parquet_bloom_probe", "read_csv", "read_csv_auto", "sniff_csv", "read_json",
    "read_json_auto", "read_json_objects", "read_json_objects_auto", "read_ndjson",
    "read_ndjson_auto", "read_ndjson_objects", "read_text", "read_blob", "glob",
    # values
    "range", "generate_series", "unnest", "json_each", "json_tree", "repeat", "repeat_row",
    "summary", "histogram", "histogram_values", "icu_calendar_names", "pg_timezone_names",
    # the catalog, read-only (SUMMARIZE, DESCRIBE and SHOW read through these)
    "duckdb_columns", "duckdb_tables", "duckdb_views", "duckdb_schemas", "duckdb_databases",
    "duckdb_constraints", "duckdb_functions", "duckdb_types", "duckdb_keywords",
    "duckdb_settings", "pragma_table_info", "pragma_show", "pragma_version",
    "pragma_collations", "pragma_platform",
})
"""The table functions a query may call: each only reads. Every other one is refused, among
them those that run SQL given as text (``query``, ``query_table``,
``json_execute_serialized_sql``), change state (``checkpoint``, ``enable_logging``,
``enable_profiling``, ``truncate_duckdb_logs``) or read memory (``arrow_scan``)."""


@dataclass(frozen=True)
class Limits:
    """What one query may cost: DuckDB's ``memory_limit`` and a wall-clock time limit."""

    memory_limit: str
    timeout_s: float

    @classmethod
    def resolve(cls, memory_limit: str | None = None, timeout: float | None = None,
                what: str = "query") -> Limits:
        """The limits given, else those of the environment, else the defaults; a bad value
        is a one-line :class:`QueryError` naming where it came from."""
        memory = memory_limit if memory_limit is not None else os.environ.get(MEMORY_ENV)
        if memory is None or memory == "":
            memory = f"{_default_memory() >> 20}MB"
        elif not _MEMORY.fullmatch(str(memory)):
            where = "memory_limit" if memory_limit is not None else MEMORY_ENV
            raise QueryError(f"{what}: {where}: {memory!r} is not an amount of memory; give "
                             "one such as 2GB or 512MB")
        raw: Any = timeout if timeout is not None else os.environ.get(TIMEOUT_ENV) or None
        try:
            seconds = _DEFAULT_TIMEOUT_S if raw is None else float(raw)
        except (TypeError, ValueError):
            seconds = float("nan")
        if not seconds > 0 or seconds == float("inf"):
            where = "timeout" if timeout is not None else TIMEOUT_ENV
            raise QueryError(f"{what}: {where}: {raw!r} is not a number of seconds above 0; "
                             "give one such as 60")
        return cls(str(memory).strip(), seconds)


_UNITS = {"b": 1, "kb": 1000, "kib": 1 << 10, "mb": 1000 ** 2, "mib": 1 << 20,
          "gb": 1000 ** 3, "gib": 1 << 30, "tb": 1000 ** 4, "tib": 1 << 40}


def memory_bytes(memory: str) -> int:
    """An amount in DuckDB's syntax (``2GB``, ``512 MiB``) in bytes."""
    number, unit = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]+)\s*", memory).groups()
    return int(float(number) * _UNITS[unit.lower()])


def cap_process_memory(limits: Limits) -> None:
    """Cap this process's data segment (``RLIMIT_DATA``: heap and private mappings) at twice
    the memory limit plus 1 GiB, for a process that only runs queries (``evalkit query``).
    DuckDB's ``memory_limit`` bounds its buffer manager, not what one function allocates for
    one value (``repeat('x', 3e9)``, ``range(4e8)`` as a list: 6 and 20 GB at a 256 MB limit,
    and an interrupt waits until the function returns); past the cap that allocation fails
    at once, as DuckDB's out-of-memory error. Never raises a cap already lower."""
    try:
        import resource
    except ImportError:  # (not every platform has it)
        return
    cap = 2 * memory_bytes(limits.memory_limit) + (1 << 30)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _default_memory() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # (not every platform says)
        return _MAX_DEFAULT_MEMORY
    return min(total // 2, _MAX_DEFAULT_MEMORY)


def sandboxed_connection(database: str | None = None, *,
                         allowed_directories: Sequence[str] = (), limits: Limits | None = None,
                         prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
                         what: str = "query") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that can read only ``allowed_directories`` (none: no
    file at all) and ``database`` (a DuckDB file, attached read-only as the default
    catalog), with ``limits``' memory limit and the configuration locked. ``prepare(con)``
    runs before file access is turned off (to register Python objects a query may read)."""
    import duckdb

    limits = limits or Limits.resolve(what=what)
    con = duckdb.connect(config={**SETTINGS, "memory_limit": limits.memory_limit})
    # no Python parameter here: binding one makes DuckDB import pandas (and numpy, pyarrow)
    # when installed, most of a query's start-up
    if database is not None:
        try:
            con.execute(f"ATTACH {sql_literal(database)} AS state (READ_ONLY)")
        except duckdb.Error as exc:
            con.close()
            raise QueryError(f"{what}: cannot open {database}: "
                             f"{str(exc).splitlines()[0]}") from None
        con.execute("USE state")
    if prepare is not None:
        prepare(con)
    if allowed_directories:
        listed = ", ".join(sql_literal(d) for d in allowed_directories)
        con.execute(f"SET allowed_directories = [{listed}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


@contextmanager
def time_limit(limits: Limits) -> Iterator[Callable[[Any], Any]]:
    """``with time_limit(limits) as watch: watch(cursor).execute(...)``: every connection or
    cursor watched is interrupted when the body runs past the time limit; the DuckDB error
    that follows becomes :func:`query_error`'s one line."""
    watched: list[Any] = []

    def stop() -> None:
        for con in watched:
            con.interrupt()

    def watch(con: Any) -> Any:
        watched.append(con)
        return con

    timer = threading.Timer(limits.timeout_s, stop)
    timer.daemon = True
    timer.start()
    try:
        yield watch
    finally:
        # ended, not just told to end: a timer thread alive at the process's exit holds the
        # connections it watches, and DuckDB torn down from there can end the process with
        # std::terminate (exit -6; duckdb/duckdb#13904)
        timer.cancel()
        timer.join()
        watched.clear()


def query_error(exc: Exception, limits: Limits, what: str = "query") -> QueryError:
    """The one line for a DuckDB error: a limit reached says which and how to raise it."""
    import duckdb

    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, duckdb.InterruptException):
        return QueryError(f"{what}: stopped after {limits.timeout_s:g} s, the query time "
                          f"limit; make the query cheaper, or raise the limit ({TIMEOUT_ENV}"
                          "=SECONDS, evalkit query --timeout)")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryError(f"{what}: the query needs more than its memory limit "
                          f"({limits.memory_limit}); make it cheaper, or raise the limit "
                          f"({MEMORY_ENV}=4GB, evalkit query --memory-limit)")
    if isinstance(exc, duckdb.PermissionException):
        return QueryError(f"{what}: refused, a query may read only the runs directory "
                          f"({first})")
    return QueryError(f"{what}: {first}")


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str, what: str = "query",
                    save_hint: bool = True) -> dict[str, Any]:
    """Raise :class:`QueryError` (one line, starting with ``what``) unless ``sql`` is exactly
    one statement that DuckDB's parser types ``SELECT`` and whose parse tree calls no table
    function outside :data:`READ_TABLE_FUNCTIONS`. Returns the parse tree
    (``json_serialize_sql``)."""
    import duckdb

    if not isinstance(sql, str):
        raise QueryError(f"{what}: refused: the query must be text, got {type(sql).__name__}")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"{what}: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1:
        raise QueryError(f"{what}: refused: give exactly one SQL statement, got "
                         f"{len(statements)} (PIVOT runs a hidden CREATE TYPE first)")
    kind = statements[0].type.name
    if kind != "SELECT":
        hint = (" (EXPLAIN ANALYZE runs the statement it explains)" if kind == "EXPLAIN"
                else "; use --format/--out to save a result" if save_hint else "")
        raise QueryError(f"{what}: refused: only SELECT queries are allowed here, not "
                         f"{kind}{hint}")
    return _checked_tree(con, sql, what)


def _checked_tree(con: duckdb.DuckDBPyConnection, sql: str, what: str) -> dict[str, Any]:
    if "\x00" in sql:  # (DuckDB's parser ends a statement there; a SQL literal cannot hold it)
        raise QueryError(f"{what}: refused: the query contains a NUL character")
    parsed = _parse(con, sql)
    if parsed.get("error"):
        raise QueryError(f"{what}: refused: {parsed.get('error_message', 'not a SELECT')}")
    for name in sorted(_table_functions(parsed)):
        if name.lower() not in READ_TABLE_FUNCTIONS:
            raise QueryError(f"{what}: refused: table function {name}() is not allowed here "
                             "(a query may only read)")
    return parsed


def check_expression(con: duckdb.DuckDBPyConnection, text: str,
                     what: str = "expression") -> duckdb.Expression:
    """``text`` parsed by DuckDB as exactly one expression (a predicate, a computed column),
    as a DuckDB ``Expression`` to hand to the relation API: never pasted into a statement.
    Its subqueries go through the checks of :func:`check_read_only`. A ``FROM``, a clause or
    a second expression is refused with one line."""
    import duckdb

    if not isinstance(text, str) or not text.strip():
        raise QueryError(f"{what}: refused: give one SQL expression, got {text!r}")
    if "\x00" in text:
        raise QueryError(f"{what}: refused: the expression contains a NUL character")
    try:
        expression = duckdb.SQLExpression(text)
    except duckdb.Error as exc:
        raise QueryError(f"{what}: not one SQL expression: {str(exc).splitlines()[0]}") from None
    # SQLExpression drops a FROM clause written after the expression: read the text as a
    # select list (parsed only, never run) to refuse one
    tree = _parse(con, f"SELECT {text}")
    nodes = [s.get("node", {}) for s in tree.get("statements", [])]
    if tree.get("error") or len(nodes) != 1 or nodes[0].get("type") != "SELECT_NODE" or \
            nodes[0].get("from_table", {}).get("type") != "EMPTY":
        raise QueryError(f"{what}: refused: give one SQL expression, not a statement or a "
                         "query with FROM")
    _checked_tree(con, f"SELECT {expression}", what)  # its subqueries' table functions
    return expression


def _parse(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of ``sql`` (``json_serialize_sql``: parsed, never run)."""
    import json

    (tree,) = con.execute(f"SELECT json_serialize_sql({sql_literal(sql)})").fetchone()
    return json.loads(tree)


def _table_functions(node: object) -> set[str]:
    """The name of every table function anywhere in a parse tree from json_serialize_sql."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "TABLE_FUNCTION":
                function = item.get("function") or {}
                found.add(str(function.get("function_name", "?")))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


class QueryResult:
    """The rows of one read-only query: fetch them as Python rows, pandas, Arrow or polars.
    It holds no way to run another statement."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cursor = cursor

    @property
    def columns(self) -> list[str]:
        return [d[0] for d in self._cursor.description or []]

    @property
    def description(self) -> list[tuple]:
        return self._cursor.description

    def fetchone(self) -> tuple | None:
        return self._cursor.fetchone()

    def fetchmany(self, size: int = 1) -> list[tuple]:
        return self._cursor.fetchmany(size)

    def fetchall(self) -> list[tuple]:
        return self._cursor.fetchall()

    def rows(self, size: int = 10_000) -> Iterator[tuple]:
        """Every row, read ``size`` at a time: a result within DuckDB's memory limit is never
        held whole as Python tuples (several times its size in DuckDB)."""
        while chunk := self._cursor.fetchmany(size):
            yield from chunk

    def df(self):
        """The rows as a pandas DataFrame (pandas must be installed)."""
        return self._cursor.fetchdf()

    fetchdf = df

    def arrow(self):
        """The rows as a pyarrow Table."""
        return self._cursor.to_arrow_table()

    to_arrow_table = fetch_arrow_table = arrow

    def pl(self):
        """The rows as a polars DataFrame (polars must be installed)."""
        return self._cursor.pl()

    def fetchnumpy(self) -> dict:
        return self._cursor.fetchnumpy()


class ConfigSql:
    """SQL text from a config, run in the sandbox: what the ``sql`` filter and
    ``state_check`` use, and any plugin through :func:`evalkit.plugin.sql_connection`.

    The connection is in memory (with ``database``, a DuckDB file, attached read-only),
    reads no other file, and runs only what :func:`check_read_only` or
    :func:`check_expression` accept, within the limits. Errors are
    :class:`~evalkit.errors.QueryError` lines starting with ``what`` (the config key, e.g.
    ``judges.booked.query``)."""

    def __init__(self, what: str, database: str | None = None,
                 limits: Limits | None = None) -> None:
        self.what = what
        self.limits = limits or Limits.resolve(what=what)
        self._con = sandboxed_connection(database, limits=self.limits, what=what)

    def register(self, name: str, data: Any) -> None:
        """Make ``data`` (an Arrow table or batch, a pandas DataFrame) readable as the view
        ``name`` (an identifier: letters, digits and ``_``)."""
        self._con.register(check_identifier(name, self.what), data)

    def unregister(self, name: str) -> None:
        self._con.unregister(name)

    def check(self, sql: str) -> None:
        """Raise :class:`QueryError` unless ``sql`` is one read-only ``SELECT``; parsed
        only, never run."""
        check_read_only(self._con, sql, self.what, save_hint=False)

    def expression(self, text: str) -> duckdb.Expression:
        """``text`` as one checked expression (see :func:`check_expression`)."""
        return check_expression(self._con, text, self.what)

    def sql(self, sql: str, params: object = None) -> QueryResult:
        """Run one checked ``SELECT`` (``params`` fill ``?`` or ``$name``); its rows are
        there to fetch until the next call."""
        import duckdb

        check_read_only(self._con, sql, self.what, save_hint=False)
        # on the connection itself, not a cursor: a cursor would not see the attached
        # database as its default catalog (USE is per connection)
        try:
            with time_limit(self.limits) as watch:
                watch(self._con).execute(sql, params)
        except duckdb.Error as exc:
            raise query_error(exc, self.limits, self.what) from None
        return QueryResult(self._con)

    def bind(self, table: str, *expressions: duckdb.Expression) -> None:
        """Bind ``expressions`` (from :meth:`expression`) over the view ``table`` without
        running them: a wrong column or type is a :class:`QueryError`."""
        import duckdb

        try:
            self._con.table(table).select(*expressions)
        except duckdb.Error as exc:
            raise query_error(exc, self.limits, self.what) from None

    def project(self, table: str, *expressions: duckdb.Expression,
                order_by: str | None = None) -> Any:
        """The values of ``expressions`` over the view ``table``, as a pyarrow Table (in
        ``order_by``'s order when given), within the limits."""
        import duckdb

        try:
            with time_limit(self.limits) as watch:
                watch(self._con)
                rel = self._con.table(table).select(*expressions)
                if order_by is not None:
                    rel = rel.order(order_by)
                return rel.to_arrow_table()
        except duckdb.Error as exc:
            raise query_error(exc, self.limits, self.what) from None

    def close(self) -> None:
        self._con.close()


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_identifier(name: object, what: str = "query") -> str:
    """``name`` when it is a plain SQL identifier (a view name a caller chose); else a
    one-line :class:`QueryError`."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise QueryError(f"{what}: {name!r} is not a name for a view; use letters, digits "
                         "and _ (not starting with a digit)")
    return name


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (a double quote inside doubled)."""
    return '"' + name.replace('"', '""') + '"'
