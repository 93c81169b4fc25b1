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
