"""One error hierarchy. The CLI prints an :class:`EvalkitError` in one or two lines and exits 2;
``EVALKIT_FULL_ERROR=1`` shows the traceback instead."""

from __future__ import annotations

__all__ = ["ConfigError", "EvalkitError", "PluginError", "LabelError", "QueryError", "RunFailed",
           "SourceError"]


class EvalkitError(Exception):
    """A user-facing error: the message names what is wrong and how to fix it."""

    exit_code = 2


class ConfigError(EvalkitError):
    """A config key is unknown, missing or of the wrong type."""


class PluginError(EvalkitError):
    """A plugin name is unknown, ambiguous, or its class does not honour its protocol."""


class SourceError(EvalkitError):
    """A source cannot be read at all (missing file, unreachable server)."""


class RunDirError(EvalkitError):
    """The runs directory cannot be written (disk full, permission denied, read-only)."""


class QueryError(EvalkitError):
    """A query failed or tried to reach outside the runs directory."""


class LabelError(EvalkitError):
    """Labels cannot be imported, drawn or read (unknown records, conflicting duplicates,
    values outside the judge's scale, a sample that does not exist)."""


class RunFailed(EvalkitError):
    """The run finished but an alert at or above ``runner.fail_on`` fired."""

    exit_code = 3


class JudgeErrorBudgetExceeded(RunFailed):
    """The run finished, but a judge failed on more of its records than
    ``runner.max_judge_error_rate`` allows."""

    exit_code = 4


class RegressionFound(RunFailed):
    """A regression gate failed against the run's baseline (``runner.baseline``)."""

    exit_code = 5


class RunInterrupted(EvalkitError):
    """The user stopped the run (Ctrl-C); it is marked ``interrupted`` and can be resumed."""

    exit_code = 130


# what the user can do about a file system error, by errno name
_DISK_FIXES = {
    "ENOSPC": "free some space or write elsewhere", "EDQUOT": "free some space or write elsewhere",
    "EFBIG": "free some space or write elsewhere",
    "EROFS": "write elsewhere (the file system is read-only)",
    "EACCES": "fix its permissions or write elsewhere",
    "EPERM": "fix its permissions or write elsewhere",
    "ENOTDIR": "a file is in the way of that path; choose another",
    "EISDIR": "a directory is in the way of that path; choose another",
    "EEXIST": "something is in the way of that path; choose another",
}


def disk_error(command: str, exc: OSError) -> EvalkitError:
    """A file system error (full disk, read-only, permission denied, a path in the way) as
    one line for ``command``: the path, the reason and what to do."""
    import errno
    import os

    path = exc.filename if exc.filename is not None else exc.filename2
    reason = os.strerror(exc.errno) if exc.errno else (str(exc).strip().splitlines() or
                                                       [type(exc).__name__])[0]
    fix = _DISK_FIXES.get(errno.errorcode.get(exc.errno or 0, ""), "")
    where = f"{os.fsdecode(path)}: " if path is not None else ""
    return EvalkitError(f"{command}: {where}{reason}" + (f"; {fix}" if fix else ""))
