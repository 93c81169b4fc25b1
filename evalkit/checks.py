"""Checks that plugins' ``Config.validate()`` methods share. Each raises ``ValueError`` with
the key and the fix; :func:`evalkit.config.validate_dataclass` adds the full key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.results.schemas import RECORDS

__all__ = [
    "DEFAULT_FLAG_AT", "FLAG_AT", "TEXT_COLUMNS", "check_flag_at", "check_one_of", "check_re2",
    "check_text_columns", "check_unit_interval",
]

TEXT_COLUMNS = [f.name for f in RECORDS if pa.types.is_string(f.type)]


def check_text_columns(columns: Iterable[str], key: str) -> None:
    """Every name in ``columns`` must be a text column of the records table."""
    bad = [c for c in columns if c not in TEXT_COLUMNS]
    if bad:
        raise ValueError(f"{key}: {', '.join(map(repr, bad))} not a text record column; "
                         f"choose from {', '.join(TEXT_COLUMNS)}")


def check_re2(pattern: str, key: str) -> None:
    """``pattern`` must be a regex Arrow (RE2) accepts."""
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{key}: {pattern!r} is not a valid RE2 regex ({exc}); RE2 has no "
                         "backreferences or look-around") from None


FLAG_AT = (">", ">=")
DEFAULT_FLAG_AT = ">"
"""How a score compares with a threshold wherever a threshold turns scores into flags (rate,
crosstab, agreement's kappa, judge_validation, disagreements, task_completion, ece's
correct_threshold, context_precision) and in an alert without an ``operator``: ``>`` (the
default) leaves a score exactly at the threshold unflagged, as the audit evalkit reproduces
counts ``> 0.5``; ``>=`` flags it. One setting per run: the top-level ``flag_at`` key."""


def check_flag_at(value: str, key: str = "flag_at") -> None:
    """``value`` must be ``>`` or ``>=``."""
    if value not in FLAG_AT:
        raise ValueError(f"{key}: {value!r} is not one of {' or '.join(FLAG_AT)} (how a score "
                         "exactly at a threshold counts: > not flagged, >= flagged)")


def check_one_of(value: Any, choices: Sequence[Any], key: str) -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(map(str, choices))}")


def check_unit_interval(value: float, key: str) -> None:
    """``value`` must lie in [0, 1] (a threshold on a score or a share)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{key}: {value} is not within [0, 1]")
