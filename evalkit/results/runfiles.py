"""A run's files read as what they are: input. A runs directory is shared, copied, synced and
edited by hand, so a reader checks what it takes from it: a manifest, a lock or a progress
file must be a regular file (a FIFO would block the read, ``/dev/zero`` would never end) of
bounded size, a manifest a JSON object whose listed fields have their types, and a table a
regular Parquet file whose columns have the run tables' types. What fails is one warning
line naming the file (:func:`skipped`), and the other runs are still read."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import EvalkitError

if TYPE_CHECKING:
    import duckdb

__all__ = ["MAX_MANIFEST_BYTES", "RunFileError", "check_run_tables", "check_table",
           "leaves", "load_manifest", "read_small",
           "regular", "skipped", "type_problem"]

MAX_MANIFEST_BYTES = 16 << 20  # a manifest is a few KB; a config with long prompts, a few MB


class RunFileError(EvalkitError):
    """A file of a run that cannot be read as what it should be (one line naming it)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_small(path: Path, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. A FIFO, a device, a
    directory or a larger file is a :class:`RunFileError`; opening never blocks (a FIFO with
    no writer is refused, not waited for). A missing file is ``FileNotFoundError``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise RunFileError(f"{path}: a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunFileError(f"{path}: {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise RunFileError(f"{path}: {info.st_size:,} bytes, over the {limit:,} it may hold")
        chunks, size = [], 0
        while size <= limit:  # (the size may grow while it is read: read no more than limit)
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise RunFileError(f"{path}: over the {limit:,} bytes it may hold")
        return b"".join(chunks)
    finally:
        os.close(fd)


def regular(path: Path) -> bool:
    """Whether ``path`` (followed if a link) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _counts(v: object) -> bool:
    return isinstance(v, dict) and all(_whole(n) for n in v.values())


def _texts(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# the manifest fields a reader types (results.query.RUNS_COLUMNS), and what each must be
_CHECKS = {
    "VARCHAR": (lambda v: isinstance(v, str), "text"),
    "BIGINT": (_whole, "a whole number"),
    "DOUBLE": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and
               math.isfinite(v), "a finite number"),
    "TIMESTAMPTZ": (_is_time, "an ISO 8601 time"),
    "VARCHAR[]": (_texts, "a list of text"),
    "JSON": (lambda v: True, "JSON"),
}


def _config_problem(config: object) -> str | None:
    """Where the run's config, as the report, compare and the gates read it, has another
    shape than a config evalkit wrote: the key and what it must be; None when it has none."""
    if not isinstance(config, dict):
        return "is not an object (the run's config)"
    for group in ("runner", "source", "filters", "judges", "metrics", "sinks", "sweep"):
        node = config.get(group)
        if node is not None and not isinstance(node, dict):
            return f"'config.{group}' is not an object"
        if group in ("filters", "judges", "metrics", "sinks") and node:
            bad = next((k for k, v in node.items() if v is not None and
                        not isinstance(v, dict)), None)
            if bad is not None:
                return f"'config.{group}.{bad}' is not an object"
    for group, item in (("alerts", (dict,)), ("gates", (dict, str))):
        node = config.get(group)
        if node is not None and not (isinstance(node, list) and
                                     all(isinstance(x, item) for x in node)):
            return f"'config.{group}' is not a list of " + \
                ("objects" if group == "alerts" else "objects or text")
    runner = config.get("runner") or {}
    budget, fail_on = runner.get("max_judge_error_rate"), runner.get("fail_on")
    if budget is not None and (isinstance(budget, bool) or
                               not isinstance(budget, (int, float))):
        return "'config.runner.max_judge_error_rate' is not a number"
    if fail_on is not None and not isinstance(fail_on, str):
        return "'config.runner.fail_on' is not text"
    return None


# the other fields the report, compare and the gates read, and what each must be
_READ_FIELDS = {
    "excluded_by": (_counts, "an object of whole numbers (filter -> records)"),
    "judgments": (lambda v: isinstance(v, dict) and all(_counts(c) for c in v.values()),
                  "an object of objects of whole numbers (judge -> status -> judgments)"),
    "judgment_errors": (lambda v: isinstance(v, dict) and all(_counts(c) for c in v.values()),
                        "an object of objects of whole numbers (judge -> cause -> errors)"),
    "judgments_cached": (_counts, "an object of whole numbers (judge -> judgments)"),
    "offline_judges": (_texts, "a list of text"),
    "warnings": (_texts, "a list of text"),
    "judge_calls_unpriced": (_whole, "a whole number"),
}


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """``run_dir``'s manifest, checked: a regular file of at most
    :data:`MAX_MANIFEST_BYTES`, one JSON object, each field a reader types of its type
    (null allowed). :class:`RunFileError` otherwise; ``FileNotFoundError`` without one."""
    from evalkit.results.query import RUNS_COLUMNS

    path = run_dir / "manifest.json"
    data = read_small(path)
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise RunFileError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise RunFileError(f"{path}: not a JSON object but {type(manifest).__name__}")
    checks = [(key, *_CHECKS[kind]) for key, kind in RUNS_COLUMNS.items()]
    for key, check, what in checks + [(k, *c) for k, c in _READ_FIELDS.items()]:
        value = manifest.get(key)
        if value is not None and not check(value):
            raise RunFileError(f"{path}: '{key}' is {json.dumps(value)[:60]}, not {what}")
    problem = _config_problem(manifest.get("config") or {})
    if problem:
        raise RunFileError(f"{path}: {problem}" if problem.startswith("'") else
                           f"{path}: 'config' {problem}")
    return manifest


# the types a run table's columns must have to be read with the others (results.columns)
def _expected(table: str) -> dict[str, str]:
    from evalkit.results.columns import _DUCKDB, COLUMNS

    return {name: _DUCKDB[t] for name, t in COLUMNS[table]}


_NARROWER = {"BIGINT": {"INTEGER", "SMALLINT", "TINYINT"},
             "DOUBLE": {"FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT"},
             "INTEGER": {"SMALLINT", "TINYINT"},
             "TIMESTAMPTZ": {"TIMESTAMP WITH TIME ZONE"},
             "TIMESTAMP WITH TIME ZONE": {"TIMESTAMPTZ"}}


def type_problem(described: list[tuple[Any, ...]], table: str) -> str | None:
    """The first column of ``described`` (DuckDB's ``DESCRIBE`` rows) whose type is not the
    one ``table`` has (a narrower number is fine), as words; None when all are."""
    expected = _expected(table)
    for name, kind, *_ in described:
        want = expected.get(name)
        if want is not None and kind != want and kind not in _NARROWER.get(want, ()):
            return f"column '{name}' is {kind}, not {want} as in a {table} table"
    return None


def check_table(con: duckdb.DuckDBPyConnection | None, path: Path, table: str) -> str | None:
    """Why the file ``path`` cannot be read as part of ``table`` (not a regular file, not
    Parquet, a column of another type), or None when it can."""
    import duckdb

    from evalkit.results.columns import sql_literal

    if not regular(path):
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        return f"{path}: {_kind(mode)}, not a regular file"
    if con is None:
        con = duckdb.connect()
    try:
        described = con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({sql_literal(str(path))})").fetchall()
    except duckdb.PermissionException:
        raise  # (a link out of the runs directory: the caller's own error says so)
    except duckdb.Error as exc:
        return f"{path}: not a {table} table ({str(exc).splitlines()[0]})"
    problem = type_problem(described, table)
    return f"{path}: {problem}" if problem else None


def leaves(run_dir: Path, path: Path) -> str | None:
    """Why ``path`` (a file a run's reader would open) is not ``run_dir``'s to read (it
    resolves outside it: a link, an absolute or ``..`` path), or None when it is inside."""
    try:
        inside = Path(path).resolve().is_relative_to(Path(run_dir).resolve())
    except (OSError, ValueError, RuntimeError):  # (a loop of links, a NUL)
        inside = False
    if inside:
        return None
    return (f"{path}: leads outside the run directory {run_dir} (a symbolic link?); a run's "
            "files must be inside it")


def check_run_tables(run_dir: Path) -> None:
    """Raise :class:`RunFileError` naming the first of ``run_dir``'s table files that cannot
    be read as its table (a reader of this one run stops in one line instead of a
    traceback)."""
    import duckdb

    from evalkit.results.runs import TABLE_FILES

    con = duckdb.connect()
    try:
        for table, pattern in TABLE_FILES.items():
            for path in sorted(run_dir.glob(pattern)):
                problem = leaves(run_dir, path) or check_table(con, path, table)
                if problem:
                    raise RunFileError(problem)
    finally:
        con.close()


_SAID: set[str] = set()


def skipped(problem: str) -> None:
    """Say, once per process, that a file was left out and why (a warning line on
    stderr)."""
    if problem in _SAID:
        return
    _SAID.add(problem)
    from evalkit.safetext import visible

    print(f"evalkit: warning: {visible(problem)}; left out (the other runs are read)",
          file=sys.stderr)
