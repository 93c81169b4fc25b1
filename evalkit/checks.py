"""Checks that plugins' ``Config.validate()`` methods share. Each raises ``ValueError`` with
the key and the fix; :func:`evalkit.config.validate_dataclass` adds the full key."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.results.schemas import RECORDS

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


def check_one_of(value: Any, choices: Sequence[Any], key: str) -> None:
    """``value`` must be one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(map(str, choices))}")


def check_unit_interval(value: float, key: str) -> None:
    """``value`` must lie in [0, 1] (a threshold on a score or a share)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{key}: {value} is not within [0, 1]")
