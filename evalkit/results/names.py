"""Run ids and experiment names are names, never paths: a run lives at
``<runs_dir>/<experiment>/<run_id>/``, and nothing a config, a command line or a manifest
says may put it anywhere else (``../../x``, ``/abs``, ``a/b``, ``.``, ``..``, a hidden
``.x`` no listing sees, a NUL, a glob pattern).

:func:`check_name` is the one rule, and :func:`run_dir_of` / :func:`run_key_of` the one way
a run id and an experiment become a path (local) or an object key (object storage)."""

from __future__ import annotations

import re
from pathlib import Path

from evalkit.errors import ConfigError

__all__ = ["MAX_NAME", "MAX_NAME_BYTES", "check_name", "run_dir_of", "run_key_of"]

MAX_NAME = 128
# bytes as UTF-8: a file name holds 255, and a run's directory is also named inside longer
# ones (.merge-<run_id>-<pid>, sweep-<run_id>); 128 letters of another script can be 512
MAX_NAME_BYTES = 200
# a letter, digit or _ first (a leading '.' hides a run from every listing, a leading '-'
# reads as an option), then letters, digits, '_', '-' and '.'; any script's letters
_NAME = re.compile(r"[^\W][\w.\-]*")


def check_name(value: object, key: str, what: str = "run id",
               example: str | None = None) -> str:
    """``value`` when it is a valid name for a run id or an experiment; else a one-line
    :class:`ConfigError` naming ``key``, the value and the fix (``example``: how to give a
    good one; default ``key=nightly-2``)."""
    fix = (f"use letters, digits, '_', '-' and '.' (not first), at most {MAX_NAME} "
           f"characters; e.g. {example or key + '=nightly-2'}")
    if not isinstance(value, str):
        raise ConfigError(f"{key}: {value!r} is not a valid {what}: it must be text; {fix}")
    if not value:
        raise ConfigError(f"{key}: the {what} is empty; {fix}")
    if len(value) > MAX_NAME:
        raise ConfigError(f"{key}: the {what} is {len(value)} characters long; {fix}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise ConfigError(f"{key}: the {what} is {size} bytes long as UTF-8, over the "
                          f"{MAX_NAME_BYTES} a file name holds beside evalkit's prefixes "
                          f"(letters outside ASCII take 2 to 4 bytes); {fix}")
    if not _NAME.fullmatch(value):
        shown = value.encode("unicode_escape").decode("ascii")
        if "/" in value or "\\" in value or value in (".", ".."):
            problem = "it would be a path, not a name"
        elif value.startswith("."):
            problem = "a name starting with '.' is hidden from every listing"
        else:
            problem = "it holds characters a name cannot have"
        raise ConfigError(f"{key}: '{shown}' is not a valid {what}: {problem}; {fix}")
    return value


def run_dir_of(runs_dir: Path, experiment: str, run_id: str) -> Path:
    """``runs_dir/experiment/run_id``, both checked by :func:`check_name`."""
    return runs_dir / check_name(experiment, "experiment", "experiment name") / \
        check_name(run_id, "runner.run_id")


def run_key_of(experiment: str, run_id: str) -> tuple[str, str]:
    """``(experiment, run_id)``, both checked: the parts of a run's key on object storage."""
    return (check_name(experiment, "experiment", "experiment name"),
            check_name(run_id, "runner.run_id"))
