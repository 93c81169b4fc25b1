"""Shared pieces of the deterministic judges: code fences, column checks, and building the
judgments table from per-row columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.results.schemas import json_text

_TRUE_LABEL = "pass"
_FALSE_LABEL = "fail"


def strip_code_fence(text: str) -> str:
    """The body of a Markdown code block (```json … ```) when ``text`` is one, else ``text``."""
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        body = s[3:-3]
        first_newline = body.find("\n")
        if first_newline != -1 and body[:first_newline].strip().isalnum():
            body = body[first_newline + 1:]  # drop the info string (json, yaml, …)
        elif first_newline != -1 and not body[:first_newline].strip():
            body = body[first_newline + 1:]
        return body.strip()
    return text


def _arr(values: Any, typ: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return pa.array(values, typ)


def verdicts(record_ids: Any, passed: Any, *, value: Any = None, labels: Any = None,
             pass_label: str = _TRUE_LABEL, fail_label: str = _FALSE_LABEL,
             status: Any = None, explanation: Any = None, error: Any = None,
             details: Sequence[Any] | None = None) -> pa.Table:
    """A judgments table from per-row columns (Arrow arrays or lists): ``value`` defaults to
    1.0 for passed and 0.0 for failed (null when ``passed`` is null), ``label`` to
    ``pass_label``/``fail_label``, ``status`` to ``ok``."""
    passed = _arr(passed, pa.bool_())
    n = len(passed)
    cols: dict[str, Any] = {
        "record_id": record_ids,
        "value": pc.cast(passed, pa.float64()) if value is None else _arr(value, pa.float64()),
        "passed": passed,
        "label": pc.if_else(passed, pass_label, fail_label) if labels is None
        else _arr(labels, pa.string()),
        "status": pa.repeat(pa.scalar("ok"), n) if status is None
        else _arr(status, pa.string()),
    }
    if explanation is not None:
        cols["explanation"] = _arr(explanation, pa.string())
    if error is not None:
        cols["error"] = _arr(error, pa.string())
    if details is not None:
        cols["details"] = pa.array([json_text(d) for d in details], pa.string())
    return pa.table(cols)
