"""Tool results that claim success while carrying failure (failure mode C of the audit: a
tool runner reported success for a command that failed, and the model carried on as if it
had worked). Shared by the ``tool_success_mismatch`` and ``failure_mode`` judges.

Tool results are read from the ``context`` list, from ``input`` chat messages with role
``tool`` or ``function``, and from inside an ``output`` that is a JSON object (Langfuse logs
an observation's output as one: ``{"tool_result": {...}, "content": "..."}``); each is parsed
as JSON (a JSON string holding JSON is unwrapped, nested objects are searched). A result
*claims success* with ``success``/``ok: true`` or ``status: success|ok``; it *carries
failure* with a non-zero ``exit_code`` (``exitCode``, ``returncode``, ``return_code``,
``status_code`` >= 400) or non-empty ``stderr``.

Whether the output *acknowledges* a failure is read from the model's words only: the output's
text, or, for an output object, its text values outside the tool results it holds. An object
whose only content is the failed tool result acknowledges nothing (its ``exit_code`` and
``stderr`` keys are the failure, not an admission of it)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.paths import parse_json

__all__ = ["DEFAULT_ACK", "ToolResultCheck", "ToolSuccessMismatchConfig", "mismatches",
           "split_output", "tool_results"]

_SUCCESS_FLAGS = ("success", "ok", "succeeded")
_SUCCESS_STATUS = ("success", "succeeded", "ok", "completed", "done")
_EXIT_KEYS = ("exit_code", "exitcode", "returncode", "return_code", "exit_status")
_STDERR_KEYS = ("stderr", "std_err", "error_output")
_TOOL_ROLES = ("tool", "function", "ipython")
_MAX_DEPTH = 6
_SOURCES = ("context", "input", "output")
_TOOL_ROLE_HINT = r'"role"\s*:\s*"(tool|function|ipython)"'
DEFAULT_ACK = (r"(?i)\b(error|errors|fail|failed|failure|failing|non-zero|nonzero|exit code|"
               r"exit status|stderr|did not work|didn't work|unsuccessful|not succeed)\b")


@dataclass(frozen=True)
class ToolSuccessMismatchConfig:
    sources: list[str] = field(default_factory=lambda: list(_SOURCES))  # context, input, output
    acknowledgement: str | None = DEFAULT_ACK  # regex: the output admits the failure (null: off)
    ignore_stderr: list[str] = field(default_factory=list)  # regexes of harmless stderr lines

    def validate(self) -> None:
        bad = [s for s in self.sources if s not in _SOURCES]
        if bad or not self.sources:
            raise ValueError(f"sources: {bad or '[]'}; choose from {', '.join(_SOURCES)}")
        patterns = [("acknowledgement", self.acknowledgement)] if self.acknowledgement else []
        patterns += [(f"ignore_stderr[{i}]", p) for i, p in enumerate(self.ignore_stderr)]
        for key, pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{key}: not a valid regex ({exc})") from None


def _lower_keys(obj: dict[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in obj.items()}


def _claims_success(obj: dict[str, Any]) -> bool:
    if any(obj.get(k) is True for k in _SUCCESS_FLAGS):
        return True
    status = obj.get("status")
    return isinstance(status, str) and status.strip().lower() in _SUCCESS_STATUS


def _failure_evidence(obj: dict[str, Any], ignore: list[re.Pattern[str]],
                      depth: int = 0) -> list[str]:
    """What in ``obj`` (and the objects nested in it) says the command failed."""
    found = []
    for key in _EXIT_KEYS:
        code = obj.get(key)
        if isinstance(code, (int, float)) and not isinstance(code, bool) and code != 0:
            found.append(f"{key}={code:g}")
        elif isinstance(code, str) and code.strip().lstrip("-").isdigit() and int(code) != 0:
            found.append(f"{key}={code.strip()}")
    status_code = obj.get("status_code")
    if isinstance(status_code, int) and not isinstance(status_code, bool) and status_code >= 400:
        found.append(f"status_code={status_code}")
    for key in _STDERR_KEYS:
        err = obj.get(key)
        if isinstance(err, str) and err.strip():
            lines = [ln for ln in err.strip().splitlines()
                     if ln.strip() and not any(p.search(ln) for p in ignore)]
            if lines:
                found.append(f"{key}: {lines[0][:120]}")
    if depth < _MAX_DEPTH:
        for value in obj.values():
            nested = _as_object(value)
            if nested is not None:
                found.extend(_failure_evidence(nested, ignore, depth + 1))
    return found


def _as_object(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return _lower_keys(value)
    if isinstance(value, str) and value.lstrip()[:1] == "{":
        ok, parsed = parse_json(value)
        if ok and isinstance(parsed, dict):
            return _lower_keys(parsed)
    return None


_RESULT_KEYS = frozenset((*_SUCCESS_FLAGS, *_EXIT_KEYS, *_STDERR_KEYS, "status_code"))


def _is_tool_result(obj: dict[str, Any]) -> bool:
    """An object shaped like a tool result: it says whether it succeeded, or how it exited."""
    return _claims_success(obj) or any(k in obj for k in _RESULT_KEYS)


def split_output(output: str | None) -> tuple[list[str], str]:
    """The tool results logged inside ``output`` (a JSON object or list; as JSON text) and
    the model's own words: every text value outside those results, or the whole output when
    it is not JSON."""
    if not output or output.lstrip()[:1] not in "{[":
        return [], output or ""
    ok, parsed = parse_json(output)
    if not ok or not isinstance(parsed, (dict, list)):
        return [], output
    results: list[str] = []
    words: list[str] = []

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, str):
            nested = _as_object(node)
            if nested is not None and depth < _MAX_DEPTH:
                walk(nested, depth + 1)
            elif node.strip():
                words.append(node)
        elif isinstance(node, dict):
            if _is_tool_result(_lower_keys(node)):
                results.append(json.dumps(node))
            elif depth < _MAX_DEPTH:
                for value in node.values():
                    walk(value, depth + 1)
        elif isinstance(node, list) and depth < _MAX_DEPTH:
            for item in node:
                walk(item, depth + 1)

    walk(parsed, 0)
    return results, "\n".join(words)


def tool_results(context: list[str] | None, input_text: str | None,
                 sources: list[str], output: str | None = None) -> Iterator[str]:
    """The tool results of one record, as text."""
    if "context" in sources:
        yield from (c for c in context or [] if c)
    if "input" in sources and input_text and input_text.lstrip()[:1] == "[":
        ok, messages = parse_json(input_text)
        if ok and isinstance(messages, list):
            for m in messages:
                if isinstance(m, dict) and m.get("role") in _TOOL_ROLES:
                    content = m.get("content")
                    yield content if isinstance(content, str) else json.dumps(content)
    if "output" in sources:
        yield from split_output(output)[0]


def mismatches(results: list[str], ignore: list[re.Pattern[str]]) -> list[dict[str, Any]]:
    """The tool results that claim success while carrying failure, with the evidence."""
    out = []
    for i, text in enumerate(results):
        obj = _as_object(text)
        if obj is None or not _claims_success(obj):
            continue
        evidence = _failure_evidence(obj, ignore)
        if evidence:
            out.append({"tool_result": i, "evidence": evidence})
    return out


class ToolResultCheck:
    """The tool-result checks of one configuration: :meth:`classify` one record, or
    :meth:`classify_table` a table of them."""

    def __init__(self, config: ToolSuccessMismatchConfig) -> None:
        self.config = config
        self.ignore = [re.compile(p) for p in config.ignore_stderr]
        self.ack = re.compile(config.acknowledgement) if config.acknowledgement else None

    def classify(self, context: list[str] | None, input_text: str | None,
                 output: str | None) -> tuple[str, dict[str, Any]]:
        """``(label, details)`` for one record; label is ``no_tool_results``, ``consistent``,
        ``acknowledged`` or ``mismatch``."""
        results = list(tool_results(context, input_text, list(self.config.sources), output))
        if not results:
            return "no_tool_results", {}
        found = mismatches(results, self.ignore)
        details = {"n_tool_results": len(results), "mismatches": found}
        if not found:
            return "consistent", details
        words = split_output(output)[1]  # the model's words, never a tool result's keys
        if words and self.ack is not None and self.ack.search(words):
            return "acknowledged", details
        return "mismatch", details

    def classify_table(self, table: pa.Table) -> list[tuple[str, dict[str, Any]]]:
        """:meth:`classify` for every record; a vectorised test first finds the records
        that can hold tool results at all, and only those are parsed."""
        sources = list(self.config.sources)
        n = table.num_rows
        maybe = pa.array([False] * n)
        if "context" in sources:
            maybe = pc.or_(maybe, pc.fill_null(pc.greater(
                pc.list_value_length(table.column("context")), 0), False))
        if "input" in sources:
            maybe = pc.or_(maybe, pc.fill_null(
                pc.match_substring_regex(table.column("input"), _TOOL_ROLE_HINT), False))
        if "output" in sources:
            maybe = pc.or_(maybe, pc.fill_null(
                pc.match_substring_regex(table.column("output"), r"^\s*[\[{]"), False))
        idx = pc.indices_nonzero(maybe)
        rows: list[tuple[str, dict[str, Any]]] = [("no_tool_results", {})] * n
        if len(idx):
            picked = table.select(["context", "input", "output"]).take(idx)
            for i, c, inp, out in zip(idx.to_pylist(), picked.column("context").to_pylist(),
                                      picked.column("input").to_pylist(),
                                      picked.column("output").to_pylist(), strict=True):
                rows[i] = self.classify(c, inp, out)
        return rows
