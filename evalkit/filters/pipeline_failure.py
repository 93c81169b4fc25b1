"""``pipeline_failure``: sets aside outputs that are not completions, so no judge scores
(or bills for) an infrastructure failure: an error level, a null or empty output, a logged
request envelope, an HTTP error body, or a status message matching a pattern."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

# cheap candidate tests, confirmed by parsing only the rows they match
_ENVELOPE_HINT = r'^\s*\{.*"(rawRequest|raw_request|request)"\s*:'
_HTTP_ERROR_JSON = r'^\s*\{\s*"(error|detail|errors)"\s*:'
_HTTP_ERROR_HTML = r"(?is)^\s*(<!doctype html|<html).{0,400}\b(4\d\d|5\d\d)\b"
_COMPLETION_KEYS = ("completion", "content", "text", "output", "choices", "message")


@dataclass(frozen=True)
class PipelineFailureConfig:
    levels: list[str] = field(default_factory=lambda: ["ERROR"])  # levels that mean failure
    empty_output: bool = True  # a null or whitespace-only output is a failure
    request_envelope: bool = True  # JSON output with a raw request and no completion
    http_error: bool = True  # output that is an HTTP error body (JSON error object, error page)
    status_message_pattern: str | None = None  # regex on status_message meaning failure

    def validate(self) -> None:
        if self.status_message_pattern is not None:
            try:
                re.compile(self.status_message_pattern)
            except re.error as exc:
                raise ValueError(f"status_message_pattern: not a valid regex ({exc})") from None


def is_request_envelope(text: str) -> bool:
    """True for logged SDK envelopes such as
    ``{"completion": null, "reasoning": null, "rawRequest": {...}}``: a request, no answer."""
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    if not isinstance(obj, dict):
        return False
    if not any(k in obj for k in ("rawRequest", "raw_request", "request")):
        return False
    return all(obj.get(k) in (None, "", [], {}) for k in _COMPLETION_KEYS)


def is_http_error_body(text: str) -> bool:
    """True for an error object (``{"error": {...}}``, ``{"detail": ...}``) with no completion
    beside it, or an HTML error page."""
    if re.match(_HTTP_ERROR_HTML, text):
        return True
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return (isinstance(obj, dict) and any(obj.get(k) for k in ("error", "detail", "errors"))
            and not any(obj.get(k) for k in _COMPLETION_KEYS))


def _confirm(output: pa.Array, hint: pa.Array, check) -> pa.Array:
    """Run the exact ``check`` only where the vectorised ``hint`` matched."""
    idx = pc.indices_nonzero(pc.fill_null(hint, False)).to_pylist()
    if not idx:
        return pa.array([False] * len(output))
    flags = [False] * len(output)
    texts = output.take(pa.array(idx)).to_pylist()
    for i, text in zip(idx, texts):
        flags[i] = bool(text) and check(text)
    return pa.array(flags)


class PipelineFailureFilter:
    """Marks records whose output is not a model completion, with the reason."""

    Config = PipelineFailureConfig

    def __init__(self, name: str, config: PipelineFailureConfig, ctx: object) -> None:
        self.config = config

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        cfg = self.config
        n = batch.num_rows
        output = batch.column("output")
        reason = pa.nulls(n, pa.string())

        def first(cond: pa.Array, why: pa.Array | str) -> None:
            nonlocal reason
            cond = pc.fill_null(cond, False)
            reason = pc.if_else(pc.and_(pc.is_null(reason), cond), why, reason)

        if cfg.levels:
            level = pc.utf8_upper(batch.column("level"))
            msg = pc.utf8_slice_codeunits(pc.fill_null(batch.column("status_message"), ""), 0,
                                          200)
            why = pc.binary_join_element_wise("level=", level, ": ", msg, "")
            first(pc.is_in(level, pa.array([lv.upper() for lv in cfg.levels])),
                  pc.utf8_rtrim(why, characters=": "))
        if cfg.empty_output:
            first(pc.is_null(output), "output is null (no completion)")
            first(pc.equal(pc.utf8_trim_whitespace(output), ""), "output is empty")
        if cfg.request_envelope:
            hint = pc.match_substring_regex(output, _ENVELOPE_HINT)
            first(_confirm(output, hint, is_request_envelope),
                  "output is a logged request envelope, not a completion")
        if cfg.http_error:
            hint = pc.or_(pc.match_substring_regex(output, _HTTP_ERROR_JSON),
                          pc.match_substring_regex(output, r"(?i)^\s*<(!doctype|html)"))
            first(_confirm(output, hint, is_http_error_body), "output is an HTTP error body")
        if cfg.status_message_pattern:
            sm = batch.column("status_message")
            first(pc.match_substring_regex(sm, cfg.status_message_pattern),
                  pc.binary_join_element_wise("status message matches pattern: ",
                                              pc.utf8_slice_codeunits(sm, 0, 200), ""))
        return reason
