"""``state_check``: did the downstream state really change? Runs one SQL assertion per record
against a DuckDB or SQLite database (opened read-only), with the record's fields as named
parameters, so "I've booked your flight" with no booking in the bookings table is a failure.

The query's first column of its first row is the verdict: true / non-zero passes, false / 0
or no row at all fails; NULL or an SQL error makes the judgment an error, never a verdict.
Parameters are written ``$name`` (both engines accept it): any scalar record column
(``$record_id``, ``$output``, ``$session_id`` ...) or a name defined in ``params``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.errors import ConfigError
from evalkit.paths import value_at
from evalkit.plugin import Judge
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
            if self.engine == "duckdb":
                import duckdb

                self._con = duckdb.connect(str(self.path), read_only=True)
            else:
                import sqlite3

                self._con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro",
                                            uri=True)
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
            result = con.execute(self.config.query, params).fetchone()
        except Exception as exc:  # an SQL error is this record's error, not the run's
            return {"status": "error", "error": f"{type(exc).__name__}: "
                    f"{str(exc).splitlines()[0]}"}
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
