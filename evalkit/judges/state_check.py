"""``state_check``: did the downstream state really change? Runs one SQL assertion per record
against a DuckDB or SQLite database (opened read-only), with the record's fields as named
parameters, so "I've booked your flight" with no booking in the bookings table is a failure.

The query's first column of its first row is the verdict: true / non-zero passes, false / 0
or no row at all fails; NULL or an SQL error makes the judgment an error, never a verdict.
Parameters are written ``$name`` (both engines accept it): any scalar record column
(``$record_id``, ``$output``, ``$session_id`` ...) or a name defined in ``params``.

The query is one read-only ``SELECT``, by each engine's own rules: for DuckDB, the sandbox of
every config SQL text (:class:`~evalkit.plugin.ConfigSql`: checked by DuckDB's parser when the
config loads, the database opened read-only with no other file reachable, locked settings,
memory and time limits); for SQLite, a read-only connection whose authorizer allows reading
and nothing else (no ``ATTACH``, ``PRAGMA`` or write), one statement, and a time limit. A
query refused is a config error naming the key, never a judgment."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.errors import ConfigError, QueryError
from evalkit.paths import value_at
from evalkit.plugin import ConfigSql, Judge
from evalkit.results.schemas import RECORDS

__all__ = ["ENGINES", "detect_engine", "StateCheckConfig", "StateCheckJudge"]

_PARAM = re.compile(r"(?<![\w$])\$([A-Za-z_]\w*)")
_SCALAR = [f.name for f in RECORDS if not pa.types.is_list(f.type)]
ENGINES = ("auto", "duckdb", "sqlite")


@dataclass(frozen=True)
class StateCheckConfig:
    database: str = "???"  # a DuckDB or SQLite file (relative to the working directory)
    query: str = "???"  # one SELECT; $name parameters are record fields; first cell = verdict
    params: dict[str, str] = field(default_factory=dict)  # name -> record column or metadata.path
    engine: str = "auto"  # auto (from the file's header), duckdb or sqlite

    def validate(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine: {self.engine!r} is not one of {', '.join(ENGINES)}")
        for name, path in self.params.items():
            root = path.split(".")[0]
            if root not in _SCALAR:
                raise ValueError(f"params.{name}: '{path}' must start with a record column "
                                 f"(e.g. metadata.booking_id); columns: {', '.join(_SCALAR)}")
        unknown = sorted(set(_PARAM.findall(self.query)) - set(_SCALAR) - set(self.params))
        if unknown:
            raise ValueError(f"query: ${unknown[0]} is neither a record column nor defined in "
                             f"params (params.{unknown[0]}: metadata.<path>)")
        if _engine_of(self) == "duckdb":  # (SQLite's dialect is checked by SQLite, when it runs)
            sql = ConfigSql("query")
            try:
                sql.check(self.query)  # parsed, never run
            except QueryError as exc:
                raise ValueError(str(exc)) from None
            finally:
                sql.close()


def _engine_of(config: StateCheckConfig) -> str | None:
    """The engine ``config`` names, or the one its database file says; None when unknown."""
    if config.engine != "auto":
        return config.engine
    try:
        return detect_engine(Path(config.database).expanduser())
    except (OSError, ConfigError):
        return None  # (the judge reports a missing or unknown file with its key)


def detect_engine(path: Path) -> str:
    """``sqlite`` or ``duckdb`` from the file's magic bytes."""
    with path.open("rb") as fh:
        head = fh.read(16)
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if head[8:12] == b"DUCK":
        return "duckdb"
    raise ConfigError(f"judges: state_check database '{path}' is neither a SQLite nor a DuckDB "
                      "file; set engine: sqlite or engine: duckdb if it is")


class StateCheckJudge(Judge):
    """value 1.0 (``passed``, label ``state_ok``) when the assertion holds, 0.0 (label
    ``state_missing``) when it does not; ``raw`` keeps what the query returned."""

    Config = StateCheckConfig

    def __init__(self, name: str, config: StateCheckConfig, ctx: object) -> None:
        self.name = name
        self.config = config
        self.path = Path(config.database).expanduser()
        if not self.path.is_file():
            raise ConfigError(f"judges.{name}.database: no file at '{self.path}' (working "
                              f"directory {Path.cwd()}); fix the path")
        self.engine = detect_engine(self.path) if config.engine == "auto" else config.engine
        self.names = list(dict.fromkeys(_PARAM.findall(config.query)))
        self._con: Any = None

    def _connect(self) -> Any:
        if self._con is None:
            what = f"judges.{self.name}.query"
            if self.engine == "duckdb":
                try:
                    self._con = ConfigSql(what, database=str(self.path))
                    self._con.check(self.config.query)
                except QueryError as exc:
                    raise ConfigError(str(exc)) from None
            else:
                self._con = _SqliteReader(self.path, what)
        return self._con

    def _params(self, row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name in self.names:
            value = value_at(row, self.config.params.get(name, name))
            if isinstance(value, datetime) and self.engine == "sqlite":
                value = value.isoformat()
            elif isinstance(value, (dict, list)):
                value = json.dumps(value)
            out[name] = value
        return out

    def _check(self, params: dict[str, Any]) -> dict[str, Any]:
        con = self._connect()
        try:
            if isinstance(con, ConfigSql):
                result = con.sql(self.config.query, params).fetchone()
            else:
                result = con.execute(self.config.query, params)
        except ConfigError:
            raise
        except Exception as exc:  # an SQL error is this record's error, not the run's
            name = "" if isinstance(exc, QueryError) else f"{type(exc).__name__}: "
            return {"status": "error", "error": f"{name}{str(exc).splitlines()[0]}"}
        if result is None:
            return {"status": "ok", "value": 0.0, "passed": False, "label": "state_missing",
                    "explanation": "the assertion returned no row"}
        cell = result[0]
        if cell is None:
            return {"status": "error", "error": "the assertion returned NULL; make it return "
                    "true/false or a count"}
        ok = bool(cell)
        return {"status": "ok", "value": 1.0 if ok else 0.0, "passed": ok,
                "label": "state_ok" if ok else "state_missing", "raw": str(cell),
                "explanation": f"the assertion returned {cell!r}"}

    def judge(self, batch: pa.Table) -> list[dict[str, Any]]:
        roots = {self.config.params.get(n, n).split(".")[0] for n in self.names}
        cols = ["record_id", *sorted(roots - {"record_id"})]
        rows = batch.select(cols).to_pylist()
        return [{"record_id": row["record_id"], **self._check(self._params(row))}
                for row in rows]

    def close(self) -> None:
        """Close the database connection."""
        if self._con is not None:
            self._con.close()
            self._con = None


class _SqliteReader:
    """A SQLite database read through one read-only ``SELECT`` at a time: opened read-only,
    and SQLite's authorizer refuses anything but reading (``ATTACH``, ``PRAGMA``, writes,
    ``load_extension``) while the statement is prepared; a time limit interrupts it."""

    def __init__(self, path: Path, what: str) -> None:
        import sqlite3

        from evalkit.results.sandbox import Limits, memory_bytes

        self.what = what
        self.limits = Limits.resolve(what=what)
        self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                   check_same_thread=False)
        self.con.set_authorizer(_authorize)
        # SQLite has no memory limit of its own: cap each value (a string, a blob) at a
        # quarter of the query memory limit, so one query cannot take gigabytes
        self.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH,
                          max(1 << 20, memory_bytes(self.limits.memory_limit) // 4))
        self.refused: str | None = None

    def execute(self, sql: str, params: dict[str, Any]) -> tuple | None:
        import sqlite3
        import time

        deadline = time.monotonic() + self.limits.timeout_s
        self.con.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            return self.con.execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            if "not authorized" in str(exc) or "prohibited" in str(exc):
                raise ConfigError(f"{self.what}: refused: only one read-only SELECT is "
                                  f"allowed here (SQLite: {str(exc).splitlines()[0]})") from None
            if "too big" in str(exc):  # (SQLITE_TOOBIG: a value over the cap above)
                raise QueryError(f"{self.what}: the query needs more than its memory limit "
                                 f"({self.limits.memory_limit}); make it cheaper, or raise "
                                 "the limit (EVALKIT_QUERY_MEMORY_LIMIT=4GB)") from None
            if "interrupted" in str(exc):
                raise QueryError(f"{self.what}: stopped after {self.limits.timeout_s:g} s, "
                                 "the query time limit (EVALKIT_QUERY_TIMEOUT)") from None
            raise
        except sqlite3.ProgrammingError as exc:  # several statements
            raise ConfigError(f"{self.what}: refused: give exactly one SQL statement "
                              f"(SQLite: {str(exc).splitlines()[0]})") from None

    def close(self) -> None:
        self.con.close()


def _authorize(action: int, arg1: object, arg2: object, db: object, trigger: object) -> int:
    import sqlite3

    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() != "load_extension":
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY
