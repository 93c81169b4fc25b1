"""Why an output is not a completion: an error level, a null or empty output, a logged
request envelope, a null completion object, an HTTP error body, or a status message matching
a pattern. Shared by the ``pipeline_failure`` filter and judges and the ``failure_mode`` judge.

The checks are vectorised (Arrow compute); JSON is parsed only for the rows a cheap regex
hint picked out."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit._arrow import one_array
from evalkit.checks import check_re2
from evalkit.paths import parse_json

__all__ = ["PipelineFailureConfig", "failure_reasons", "is_http_error_body",
           "is_null_completion", "is_request_envelope"]

# cheap candidate tests (RE2), confirmed by parsing only the rows they match; (?s) because
# a pretty-printed envelope spans lines. A leading quote is a JSON string holding JSON.
_ENVELOPE_HINT = r'(?s)^\s*"?\{.*(rawRequest|raw_request|request)\\?"\s*:'
_NULL_COMPLETION_HINT = r'(?s)^\s*"?\{.*completion\\?"\s*:\s*null'
_HTTP_ERROR_JSON = (r'(?s)^\s*"?\{.*(\\?"(error|detail|errors)\\?"\s*:|'
                    r'\\?"(type|object)\\?"\s*:\s*\\?"error\\?")')
_HTML_HINT = r"(?i)^\s*<(!doctype|html)"
# what every hint above starts with
_HINT_START = r'^\s*(?:"?\{|<)'
_HTTP_ERROR_HTML = re.compile(r"(?is)^\s*(<!doctype html|<html).{0,400}\b(4\d\d|5\d\d)\b")
_REQUEST_KEYS = ("rawRequest", "raw_request", "request")
_COMPLETION_KEYS = ("completion", "content", "text", "output", "choices", "message")
# keys an SDK logs beside a completion that say nothing about whether there was one
_BOOKKEEPING_KEYS = ("reasoning", "usage", "model", "id", "finish_reason", "metadata",
                     "created", "object", "latency", "cost")
_REASON_LIMIT = 200
# what an error body holds beside its error, across providers and servers: OpenAI's
# {"error": {...}}, Anthropic's {"type": "error", "error": {...}}, vLLM's and Mistral's
# {"object": "error", "message", "type", "param", "code"}, FastAPI's {"detail"}, Spring
# Boot's {"timestamp", "status", "error", "path"}, RFC 9457's {"type", "title", "status",
# "detail", "instance"}, an OpenAI batch line's {"id", "custom_id", "response": null}. An
# object with another key ({"answer": ..., "error": ...}) is an application's own data,
# unless an error key comes first, as no answer's does.
_ERROR_BODY_KEYS = frozenset((
    "error", "errors", "detail", "type", "object", "message", "code", "param", "status",
    "status_code", "statusCode", "title", "instance", "path", "timestamp", "request_id",
    "requestId", "error_type", "id", "custom_id", "response"))


@dataclass(frozen=True)
class PipelineFailureConfig:
    levels: list[str] = field(default_factory=lambda: ["ERROR"])  # levels that mean failure
    empty_output: bool = True  # a null or whitespace-only output is a failure
    request_envelope: bool = True  # JSON output with a raw request and no completion
    null_completion: bool = True  # JSON output whose completion is null and nothing else set
    http_error: bool = True  # output that is an HTTP error body (JSON error object, error page)
    status_message_pattern: str | None = None  # regex (RE2) on status_message meaning failure

    def validate(self) -> None:
        if self.status_message_pattern is not None:
            check_re2(self.status_message_pattern, "status_message_pattern")


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, unwrapping one level of JSON-string encoding (an
    output logged as ``"{\\"completion\\": null, ...}"``); ``None`` otherwise."""
    obj = parse_json(text)[1]
    return obj if isinstance(obj, dict) else None


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def _has_request(obj: dict[str, Any]) -> bool:
    for key in _REQUEST_KEYS:
        value = obj.get(key)
        if isinstance(value, dict) and value:
            return True
        if isinstance(value, str) and _json_object(value):
            return True
    return False


def is_request_envelope(text: str) -> bool:
    """True for logged SDK envelopes such as
    ``{"completion": null, "reasoning": null, "rawRequest": {...}}``: a request object (or
    JSON text of one) and no completion."""
    obj = _json_object(text)
    if obj is None or not _has_request(obj):
        return False
    return all(_empty(obj.get(k)) for k in _COMPLETION_KEYS)


def is_null_completion(text: str) -> bool:
    """True for ``{"completion": null, "reasoning": null}``: a completion field that is
    explicitly null and nothing else of substance beside it."""
    obj = _json_object(text)
    if obj is None or "completion" not in obj:
        return False
    return all(_empty(v) for k, v in obj.items() if k not in _BOOKKEEPING_KEYS)


def is_http_error_body(text: str) -> bool:
    """True for an error object with no completion beside it (``{"error": {...}}``,
    ``{"detail": ...}``, ``{"type": "error", ...}``, ``{"object": "error", "message": ...}``:
    an error key first, or only the keys of an error body, see ``_ERROR_BODY_KEYS``), or an
    HTML error page."""
    if _HTTP_ERROR_HTML.match(text):
        return True
    obj = _json_object(text)
    if not obj:
        return False
    tagged = obj.get("type") == "error" or obj.get("object") == "error"
    if not (tagged or any(obj.get(k) for k in ("error", "detail", "errors"))):
        return False
    if next(iter(obj)) not in ("error", "detail", "errors") and \
            not set(obj) <= _ERROR_BODY_KEYS:
        return False
    # (a tagged body's "message" is its error's text, not an assistant message)
    beside = [k for k in _COMPLETION_KEYS
              if not (tagged and k == "message" and isinstance(obj.get(k), str))]
    return all(_empty(obj.get(k)) for k in beside)


def _confirm(output: pa.Array | pa.ChunkedArray, hint: pa.Array,
             check: Callable[[str], bool]) -> pa.Array:
    """Run the exact ``check`` only where the vectorised ``hint`` matched, once per distinct
    text (failed calls repeat their error body: one rate-limit message for thousands)."""
    idx = pc.indices_nonzero(pc.fill_null(hint, False))
    flags = np.zeros(len(output), bool)
    if len(idx):
        texts = pc.dictionary_encode(one_array(output.take(idx)))
        verdicts = np.array([bool(text) and check(text)
                             for text in texts.dictionary.to_pylist()] + [False], bool)
        codes = pc.fill_null(texts.indices, len(texts.dictionary))  # a null: no completion
        flags[idx.to_numpy()] = verdicts[codes.to_numpy()]
    return pa.array(flags)


def _hints(output: pa.Array | pa.ChunkedArray, among: pa.Array) -> Callable[[str], pa.Array]:
    """``pattern -> whether each output matches`` for the hint patterns, which all start
    with ``_HINT_START``, false outside ``among`` (the rows no check has a reason for yet):
    an output that does not start so (most of them) is tested once, by that, not by each
    pattern, and nor is one with a reason already (a failed call's logged envelope)."""
    output = one_array(output)
    n = len(output)
    start = one_array(pc.and_(
        pc.fill_null(pc.match_substring_regex(output, _HINT_START), False), among))
    some = pc.sum(start).as_py() or 0
    if some == n:
        return lambda pattern: pc.match_substring_regex(output, pattern)
    candidates = output.filter(start)
    no = pa.repeat(pa.scalar(False), n)
    return lambda pattern: no if not some else pc.replace_with_mask(
        no, start, pc.fill_null(pc.match_substring_regex(candidates, pattern), False))


def failure_reasons(data: pa.RecordBatch | pa.Table, cfg: PipelineFailureConfig) -> pa.Array:
    """One string per row of ``data``: why its output is not a completion, or null."""
    n = data.num_rows
    output = data.column("output")
    reason: Any = pa.nulls(n, pa.string())

    def first(cond: Any, why: Any) -> None:
        nonlocal reason
        cond = pc.fill_null(cond, False)
        reason = pc.if_else(pc.and_(pc.is_null(reason), cond), why, reason)

    if cfg.levels:
        level = pc.utf8_upper(one_array(data.column("level")))
        failed = pc.fill_null(pc.is_in(level, pa.array([lv.upper() for lv in cfg.levels])),
                              False)
        if pc.any(failed).as_py():  # the reason text, for those rows only
            rows = pc.indices_nonzero(failed)
            msg = pc.utf8_slice_codeunits(pc.fill_null(
                one_array(data.column("status_message")).take(rows), ""), 0, _REASON_LIMIT)
            why = pc.binary_join_element_wise("level=", level.take(rows), ": ", msg, "")
            first(failed, pc.replace_with_mask(pa.nulls(n, pa.string()), failed,
                                               pc.utf8_rtrim(why, characters=": ")))
    if cfg.empty_output:
        first(pc.is_null(output), "output is null (no completion)")
        first(pc.equal(pc.utf8_trim_whitespace(output), ""), "output is empty")
    if cfg.request_envelope or cfg.null_completion or cfg.http_error:
        # only JSON-ish or HTML-ish outputs can be any of these; test the rest no further
        matches = _hints(output, pc.is_null(reason))  # (false where a reason is found)
        if cfg.request_envelope:
            first(_confirm(output, matches(_ENVELOPE_HINT), is_request_envelope),
                  "output is a logged request envelope, not a completion")
        if cfg.null_completion:
            hint = pc.and_(pc.is_null(reason), matches(_NULL_COMPLETION_HINT))
            first(_confirm(output, hint, is_null_completion),
                  "output is a completion object whose completion is null")
        if cfg.http_error:
            hint = pc.and_(pc.is_null(reason),
                           pc.or_(matches(_HTTP_ERROR_JSON), matches(_HTML_HINT)))
            first(_confirm(output, hint, is_http_error_body), "output is an HTTP error body")
    if cfg.status_message_pattern:
        sm = data.column("status_message")
        first(pc.match_substring_regex(sm, cfg.status_message_pattern),
              pc.binary_join_element_wise("status message matches pattern: ",
                                          pc.utf8_slice_codeunits(sm, 0, _REASON_LIMIT), ""))
    return one_array(reason)
