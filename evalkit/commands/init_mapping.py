"""The field mapping ``evalkit init FILE`` proposes: a sample of the file's rows, every path in
them at any depth, and for each record column the path that most likely holds it (by the
names along the path, the kind of its values and how many rows have one), with the value
transforms it needs (milliseconds to seconds, ``finish_reason: error`` to the ERROR level,
``user_edited: true`` to ``edited``).

A proposal says how sure it is: a column found under its own name (or a name every tool
uses for it: ``prompt_tokens``, ``finish_reason``) is sure; one found by a looser name, or
whose unit or categories were inferred from the values, is a guess, marked as such."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import itertools
import json
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.errors import ConfigError
from evalkit.paths import parts_of, walk
from evalkit.results.schemas import RECORDS
from evalkit.sources._chat import (
    assistant_text,
    blocks_of,
    langchain_messages,
    message_text,
    response_items,
)
from evalkit.sources._mapping import BadValue, coercer, json_array
from evalkit.sources._transforms import spec_key
from evalkit.sources.csv import delimiter

__all__ = ["SHOWN", "Mapping", "Proposal", "describe", "io_text", "is_messages", "propose",
           "sample_rows", "skipped_note"]

SAMPLE_ROWS = 500
_MAX_DEPTH = 8
_LEVELS = {"DEBUG", "DEFAULT", "WARNING", "ERROR"}
_FAILURE = re.compile(r"(?i)error|fail|exception|timeout|timed_out|crash|abort")
_USER_ACTIONS = (("edited", re.compile(r"(?i)edit|modif|rewr|chang")),
                 ("bypassed", re.compile(r"(?i)bypass|reject|discard|ignor|dismiss|skip")),
                 ("accepted", re.compile(r"(?i)accept|keep|kept|copied|cop(y|ie)|used|insert")))


@dataclass
class _Stat:
    """What the sample holds at one path."""

    kinds: dict[str, int] = field(default_factory=dict)  # text, number, bool, messages,
    example: Any = None                                    # object, list
    numbers: list[float] = field(default_factory=list)
    values: dict[str, int] = field(default_factory=dict)  # distinct scalars (first 50)
    lengths: list[int] = field(default_factory=list)
    # values of kind number that are text ("18", a CSV cell): text to a text column
    numeric_text: int = 0
    # chat-shaped values (messages, content blocks, an assistant message): the source reads
    # them as their text only for a column named in fields
    chat: int = 0
    # values read through the first item of a list that has others (observations.0.level):
    # one item's, never a row's
    of_many: int = 0

    @property
    def present(self) -> int:
        return sum(self.kinds.values())

    def share(self, *kinds: str) -> float:
        """The share of the values of these kinds; ``text`` counts numbers written as text
        (an answer "18"), unless ``number`` counts them already."""
        if not self.present:
            return 0.0
        text = self.numeric_text if "text" in kinds and "number" not in kinds else 0
        return (sum(self.kinds.get(k, 0) for k in kinds) + text) / self.present


@dataclass(frozen=True)
class Proposal:
    """One record column's proposed source: its path, transforms and an example value."""

    column: str
    path: str
    example: Any
    guess: bool
    why: str = ""
    scale: float | None = None
    value_map: dict[Any, str] | None = None
    message: bool = False  # a chat message, which the source reads as its text in fields

    def spec(self) -> Any:
        """The ``fields`` entry: the path, or an object with its transforms."""
        if self.scale is None and self.value_map is None:
            return self.path
        spec: dict[str, Any] = {"path": self.path}
        if self.scale is not None:
            spec["scale"] = self.scale
        if self.value_map is not None:
            spec["map"] = self.value_map
        return spec


@dataclass
class Mapping:
    """A whole proposal: the columns found, the paths left unmapped, the rows sampled."""

    proposals: dict[str, Proposal]
    unmapped: list[tuple[str, Any]]
    n_rows: int
    # what could not be mapped or needs a look, and why (a duration the rows hold only as
    # start and end; messages written as Python's printout, not JSON)
    notes: list[str] = field(default_factory=list)
    # the rows of a tree (runs with a parent id) that lack the output, as the predicate and
    # reason of a sql filter that sets them aside before pipeline_failure calls them failed
    set_aside: tuple[str, str] | None = None
    # a list of another evaluator's scores ({name, value}) in each row: imported as judgments
    scores_list: str | None = None


def sample_rows(path: Path, limit: int = SAMPLE_ROWS,
                skipped: list[tuple[int, str]] | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` rows of a JSONL or CSV file (``.gz`` too) that are objects. A JSONL
    line after the first object that is not one (a log cut short by a crash, a line nested
    past the parser's depth) is left out, its line and why added to ``skipped``: the run
    rejects it, with its reason."""
    name = path.name.lower().removesuffix(".gz")
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    rows: list[dict[str, Any]] = []
    skipped = [] if skipped is None else skipped
    try:  # (bytes that are not UTF-8 replaced: the run rejects their rows, naming them)
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
            if name.endswith((".csv", ".tsv")):
                first = fh.readline()
                sep = delimiter(path.name, first)  # as the source reads it
                for row in csv.DictReader(itertools.chain([first], fh), delimiter=sep):
                    rows.append({k: (v if v != "" else None) for k, v in row.items()
                                 if k is not None})
                    if len(rows) >= limit:
                        break
            else:
                for i, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except (ValueError, RecursionError) as exc:
                        why = "nested too deep to read" if isinstance(exc, RecursionError) \
                            else "not JSON"
                        if rows:
                            skipped.append((i, why))
                            continue
                        if line.strip() == "[":  # a JSON array written out, pretty
                            raise ConfigError(_array(path, None)) from None
                        raise ConfigError(f"init: {path}:{i} is {why}; give a JSONL file "
                                          "(one object a line) or a .csv") from None
                    if json_array(obj, str(path)):
                        raise ConfigError(_array(path, len(obj)))
                    if isinstance(obj, dict):
                        rows.append(obj)
                    elif rows:
                        skipped.append((i, f"a JSON {type(obj).__name__}, not an object"))
                    if len(rows) >= limit:
                        break
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"init: cannot read {path}: {exc}") from None
    if not rows:
        raise ConfigError(f"init: {path} has no JSON object (JSONL) or CSV row to sample")
    return rows


def skipped_note(skipped: list[tuple[int, str]]) -> str:
    """The line that says which sampled lines were left out, and why."""
    n = len(skipped)
    shown = "; ".join(f"line {line}: {why}" for line, why in skipped[:3])
    return (f"skipped {n} line{'s' if n > 1 else ''} that {'are' if n > 1 else 'is'} not a "
            f"JSON object ({shown}{'; …' if n > 3 else ''}): the run rejects "
            f"{'them' if n > 1 else 'it'}, with the reason")


def _array(path: Path, n: int | None) -> str:
    count = f" of {n} objects" if n is not None else ""
    return (f"init: {path} is one JSON array{count}, not JSONL (one object a line); make it "
            f"JSONL: jq -c '.[]' {path} > {str(path).removesuffix('.json')}.jsonl, then "
            "evalkit init that file")


def is_messages(value: Any) -> bool:
    """Whether ``value`` is a list of chat messages (objects with a role and content), or a
    list that holds one such list (LangChain's batch of one conversation, as the sources
    read it)."""
    value = langchain_messages(value)
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and "role" in m and ("content" in m or "parts" in m)
        for m in value)


def _parsed(value: Any) -> Any:
    """A string that holds a JSON object or array, parsed (logs often store JSON as text)."""
    if isinstance(value, str) and value[:1] in ("{", "[") and len(value) < 1_000_000:
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


# a number with thousands separators or a unit ("1,234", "812ms", "$0.02"): a number to the
# columns that want one, which init then finds the source cannot read, and says so
_NUMBER_WITH_UNIT = re.compile(r"\s*[-+$]?\d{1,3}(?:,\d{3})*(?:\.\d+)?\s*(?:[a-zA-Zµ%]{1,3})?\s*|"
                               r"\s*[-+$]?\d+(?:\.\d+)?\s*[a-zA-Zµ%]{1,3}\s*")


def _leading_number(value: Any) -> float | None:
    """``value`` as a number, or the number a text with a unit or separators starts with."""
    number = _number(value)
    if number is None and isinstance(value, str) and _NUMBER_WITH_UNIT.fullmatch(value):
        number = _number(re.sub(r"[^\d.\-+]", "", value))
    return number


def _walk(value: Any, path: str, depth: int,
          many: bool = False) -> Iterator[tuple[str, str, Any, bool]]:
    """``(path, kind, value, many)`` for ``value`` and everything under it; ``many``: the
    path goes through the first item of a list that has others (one item of several)."""
    value = _parsed(value)
    if value is None:
        return
    if is_messages(value):
        yield path, "messages", value, many
        return
    if isinstance(value, dict):
        yield path, "object", value, many
        if depth < _MAX_DEPTH:
            for key, inner in value.items():
                # a key with dots (OpenTelemetry's ``gen_ai.request.model``, a CSV header
                # ``meta.model``) is named by its steps: evalkit.paths.walk joins them back
                if isinstance(key, str) and key and not key.isdigit():
                    yield from _walk(inner, f"{path}.{key}" if path else key, depth + 1,
                                     many)
        return
    if isinstance(value, list):
        blocks = blocks_of(value)
        if blocks is not None:  # content blocks: their text is what the source reads
            yield path, "text", _ChatText(message_text({"content": blocks})), many
            return
        items = response_items(value)
        text = assistant_text(items) if items is not None else None
        if text:  # OpenAI Responses' output items: the assistant's text, as the source reads
            yield path, "text", _ChatText(text), many
            return
        yield path, "list", value, many
        # choices.0.message.content; LangChain's generations.0.0.text (a list of lists)
        if value and isinstance(value[0], (dict, list)) and depth < _MAX_DEPTH:
            yield from _walk(value[0], f"{path}.0", depth + 1, many or len(value) > 1)
        return
    if isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true",
                                                                               "false")):
        yield path, "bool", value, many
    elif _leading_number(value) is not None:
        yield path, "number", value, many
    else:
        yield path, "text", value, many


def _stats(rows: list[dict[str, Any]]) -> dict[str, _Stat]:
    stats: dict[str, _Stat] = {}
    for row in rows:
        for path, kind, value, many in _walk(row, "", 0):
            if not path:
                continue
            st = stats.setdefault(path, _Stat())
            st.of_many += many
            st.kinds[kind] = st.kinds.get(kind, 0) + 1
            if kind == "messages" or isinstance(value, _ChatText) or (
                    kind == "object" and isinstance(value.get("role"), str) and
                    ("content" in value or "parts" in value)):
                st.chat += 1
            if st.example is None:
                st.example = value
            if kind == "number":
                st.numbers.append(_leading_number(value) or 0.0)
                if isinstance(value, str):
                    st.numeric_text += 1
                    st.lengths.append(len(value))
            if kind in ("text", "bool", "number") and (
                    len(st.values) < 50 or str(value) in st.values):
                st.values[str(value)] = st.values.get(str(value), 0) + 1
            if kind == "text":
                st.lengths.append(len(value))
    return stats


def _words(path: str) -> list[list[str]]:
    """Each step of ``path`` as lower-case words: ``meta.latencyMs`` -> [[meta], [latency, ms]]."""
    steps = []
    for step in path.split("."):
        if step.isdigit():
            continue
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", step).lower()
        steps.append([w for w in re.split(r"[^a-z0-9]+", snake) if w])
    return steps


class _ChatText(str):
    """The text of a chat-shaped value (content blocks, Responses' output items), as the
    source reads it: marks the path as one whose values need reading as chat."""


@dataclass(frozen=True)
class _Role:
    column: str
    kinds: tuple[str, ...]
    sure: tuple[str, ...]  # leaf names that settle it
    loose: tuple[str, ...] = ()  # leaf words that suggest it
    context: tuple[str, ...] = ()  # words of an enclosing step that support it
    avoid: tuple[str, ...] = ()  # words of an enclosing step that rule it out


# in the order they are decided: a path taken by one column is not offered to the next
_ROLES = (
    _Role("input_tokens", ("number",), ("prompt_tokens", "input_tokens", "prompttokens"),
          ("prompt", "input"), ("usage", "tokens", "token_usage", "tokenusage", "token")),
    _Role("output_tokens", ("number",),
          ("completion_tokens", "output_tokens", "completiontokens"),
          ("completion", "output"), ("usage", "tokens", "token_usage", "tokenusage", "token")),
    _Role("latency_s", ("number",),
          ("latency", "latency_s", "latency_ms", "duration", "duration_ms", "duration_s",
           "elapsed", "elapsed_ms", "response_time", "response_time_ms", "latency_seconds",
           "latency_us", "latency_ns", "duration_us", "duration_ns", "elapsed_us",
           "elapsed_ns"),
          ("latency", "duration", "elapsed", "time_ms", "ms")),
    _Role("cost_usd", ("number",), ("cost", "cost_usd", "total_cost", "calculated_total_cost",
                                     "price", "usd", "spend", "response_cost"),
          ("cost", "price", "usd", "spend")),
    _Role("record_id", ("text", "number"),
          ("id", "record_id", "uuid", "request_id", "example_id", "sample_id", "item_id",
           "test_id", "row_id", "call_id", "log_id", "generation_id", "observation_id"),
          ("id", "uuid"), avoid=("messages", "session", "trace", "user", "usage")),
    _Role("trace_id", ("text", "number"), ("trace_id",)),
    _Role("session_id", ("text", "number"),
          ("session_id", "conversation_id", "thread_id", "chat_id")),
    _Role("model", ("text",), ("model", "model_name", "model_id", "engine", "deployment",
                               "provider_id"), ("model",),
          avoid=("messages",)),
    _Role("level", ("text", "bool", "number"),
          ("level", "status", "finish_reason", "stop_reason", "state", "outcome_status",
           "is_error", "failed", "status_code", "http_status"), ("status", "finish", "level")),
    _Role("status_message", ("text",),
          ("status_message", "error", "error_message", "exception", "errors"),
          ("error",)),
    _Role("user_action", ("text", "bool", "number"),
          ("user_action", "action", "user_edited", "edited", "accepted", "was_edited",
           "user_accepted", "feedback_action"), ("edited", "action", "accepted")),
    _Role("reference", ("text",),
          ("expected", "expected_output", "expected_answer", "reference", "reference_answer",
           "ground_truth", "gold", "gold_answer", "target", "ideal", "correct_answer",
           "golden_answer", "label_text"), ("expected", "reference", "gold", "truth")),
    # the passages a RAG answer was given (Ragas' retrieved_contexts, DeepEval's
    # retrieval_context): a list of texts, or one text
    _Role("context", ("list", "text"),
          ("context", "contexts", "retrieved_contexts", "retrieval_context",
           "retrieved_context", "retrieved_passages", "passages", "retrieved_documents"),
          ("contexts", "passages", "retrieved")),
    _Role("output", ("text",),
          ("output", "response", "completion", "answer", "generation", "reply",
           "prediction", "generated_text", "output_text", "model_output", "outputs",
           "response_text", "completion_text", "answer_text"),
          ("output", "response", "completion", "answer", "text", "content", "reply",
           "generation", "prediction", "generated", "result"),
          ("response", "output", "outputs", "completion", "choices", "message", "generation",
           "result"), ("request", "prompt", "input", "inputs", "messages", "vars", "usage",
                       "error")),
    # after the output: the prompt is read where the answers are (_answered)
    _Role("input", ("messages", "text"),
          ("input", "prompt", "question", "query", "messages", "instruction", "user_input",
           "user_message", "inputs", "raw_prompt", "question_text"),
          ("prompt", "question", "query", "input", "messages", "instruction"),
          ("request", "prompt", "input", "inputs", "vars"),
          # a failed call's output may be the request envelope, its messages included
          ("output", "outputs", "response", "completion", "choices", "generations",
           "error")),
    _Role("timestamp", ("text", "number"),
          ("timestamp", "created_at", "created", "start_time", "time", "ts", "date",
           "datetime", "logged_at", "request_time"), ("timestamp", "time", "created", "date")),
)


# the order the proposal is printed in
SHOWN = ("record_id", "input", "output", "reference", "context", "model", "level",
         "status_message", "latency_s", "cost_usd", "input_tokens", "output_tokens",
         "user_action", "timestamp", "trace_id", "session_id")


def _score(role: _Role, path: str, st: _Stat, n_rows: int) -> tuple[float, bool] | None:
    """How well ``path`` fits ``role`` (higher is better) and whether the fit is sure."""
    steps = _words(path)
    if not steps or not st.present or (st.of_many and role.column != "output"):
        return None
    # an output may be an object in the rows of failed calls (an error body, an envelope)
    if st.share(*role.kinds) < (0.5 if role.column == "output" else 0.8):
        return None
    leaf = "_".join(steps[-1])
    if len(steps) > 1 and "_".join(steps[-2] + steps[-1]) in role.sure:
        leaf = "_".join(steps[-2] + steps[-1])  # provider.id as provider_id
    enclosing = {w for s in steps[:-1] for w in s} | {"_".join(s) for s in steps[:-1]}
    if enclosing & set(role.avoid):
        return None
    if leaf in role.sure:
        score, sure = 10.0, True
    elif set(steps[-1]) & set(role.loose):
        score, sure = 5.0, False
    else:
        return None
    if role.context:
        score += 2.0 * len(enclosing & set(role.context))
    score += 2.0 * st.present / n_rows - 0.1 * len(steps)
    if role.column == "output":
        score += min(statistics.mean(st.lengths), 400) / 200 if st.lengths else 0
    if role.column in ("input_tokens", "output_tokens") and not (
            enclosing & set(role.context) or "tokens" in steps[-1]):
        return None  # `input` or `completion` alone, outside a usage object, is no count
    if role.column == "record_id" and (len(st.values) < min(st.present, 50) or set(
            steps[-1]) & {"trace", "session", "parent", "user", "conversation", "thread"}):
        return None  # an id is distinct in every sampled row; a trace's id is not a call's
    return score, sure


def _latency(path: str, st: _Stat) -> tuple[float | None, bool, str]:
    """The scale that makes ``path``'s numbers seconds, whether it is a guess, and why."""
    words = [w for s in _words(path) for w in s]
    last = words[-1] if words else ""
    if last in ("ms", "millis", "milliseconds") or path.endswith("Ms"):
        return 0.001, False, "milliseconds (by its name)"
    if last in ("s", "sec", "secs", "seconds"):
        return None, False, "seconds (by its name)"
    if last in ("us", "micros", "microseconds"):
        return 1e-6, False, "microseconds (by its name)"
    if last in ("ns", "nanos", "nanoseconds"):
        return 1e-9, False, "nanoseconds (by its name)"
    median = statistics.median(st.numbers) if st.numbers else 0.0
    if median > 100:
        return 0.001, True, f"median {median:g}: taken as milliseconds"
    return None, True, f"median {median:g}: taken as seconds"


# a flag's spellings, yes then no
_FLAG_PAIRS = (("true", "false"), ("yes", "no"), ("y", "n"), ("t", "f"), ("1", "0"))


def _flags(st: _Stat) -> dict[str, bool] | None:
    """Each value of a flag written as text or a number (``yes``/``no``, ``Y``/``N``,
    ``1``/``0``) and whether it says yes, with the other side of each pair the sample lacks
    (a log whose first rows all say ``no`` still maps its ``yes``); ``None`` when a value is
    no such flag."""
    out: dict[str, bool] = {}
    for v in st.values:
        key = v.strip().lower()
        if _number(key) in (0.0, 1.0):
            key = str(int(_number(key) or 0))
        pair = next((p for p in _FLAG_PAIRS if key in p), None)
        if pair is None:
            return None
        out[v] = key == pair[0]
        other = pair[1] if out[v] else pair[0]
        out.setdefault(other.upper() if v.isupper() else other, not out[v])
    return out or None


def _level_map(st: _Stat, path: str) -> tuple[dict[Any, str] | None, bool, str] | None:
    """The map from ``path``'s values to levels (ERROR for failures), or ``None`` when the
    values are levels already; ``None`` overall when nothing in them reads as a failure."""
    values = list(st.values)
    words = {w for s in _words(path) for w in s}
    flags = _flags(st) if st.share("bool") < 0.8 else None
    if flags is not None and words & {"error", "errored", "failed", "fail", "failure",
                                      "exception", "ok", "success", "succeeded"}:
        # a flag named for failure (is_error: "yes", failed: 1) or success (ok: "N")
        failed = not words & {"ok", "success", "succeeded"}
        return ({v: ("ERROR" if yes == failed else "DEFAULT") for v, yes in flags.items()},
                True, "a flag: " + ", ".join(v for v, yes in flags.items() if yes == failed) +
                " taken as failures")
    codes = [_number(v) for v in values]
    if st.share("number") >= 0.8 and set(codes) <= {0.0, 1.0, 2.0} and 2.0 in codes and \
            "status" in {w for s in _words(path) for w in s}:
        # an OpenTelemetry span status: 0 unset, 1 ok, 2 error
        # every code, not only the sampled ones: the source rejects a level its map lacks
        codes_seen = {int(_number(v) or 0): v for v in values}
        return ({codes_seen.get(c, str(c)): ("ERROR" if c == 2 else "DEFAULT")
                 for c in (0, 1, 2)}, True, "span status code: 2 (ERROR) taken as failures")
    if st.share("number") >= 0.8:  # an HTTP status: 4xx and 5xx are failed calls
        if not all(c is not None and 100 <= c < 600 for c in codes) or \
                not any(c is not None and c >= 400 for c in codes):
            return None
        return ({v: ("ERROR" if (_number(v) or 0) >= 400 else "DEFAULT") for v in values},
                True, "HTTP status: 4xx/5xx taken as failures")
    if st.share("bool") >= 0.8:
        negated = any(w in ("ok", "success", "succeeded") for s in _words(path) for w in s)
        return ({True: "DEFAULT", False: "ERROR"} if negated else
                {True: "ERROR", False: "DEFAULT"}), True, "a boolean flag"
    if {v.upper() for v in values} <= _LEVELS:
        return None, False, "levels"
    failed = [v for v in values if _FAILURE.search(v)]
    if not failed:
        return None
    return ({v: ("ERROR" if _FAILURE.search(v) else "DEFAULT") for v in values}, True,
            f"{', '.join(failed[:3])} taken as failures")


def _action_map(st: _Stat, path: str) -> dict[Any, str] | None:
    flags = {True: True, False: False} if st.share("bool") >= 0.8 else _flags(st)
    if flags is not None:  # a flag: true/false, yes/no, Y/N, 1/0
        words = {w for s in _words(path) for w in s}
        if words & {"edited", "edit", "modified", "changed"}:
            return {v: ("edited" if yes else "accepted") for v, yes in flags.items()}
        if words & {"accepted", "kept", "used"}:
            return {v: ("accepted" if yes else "bypassed") for v, yes in flags.items()}
        return None
    out: dict[Any, str] = {}
    for v in st.values:
        for action, pattern in _USER_ACTIONS:
            if pattern.search(v):
                out[v] = action
                break
    return out or None


def propose(rows: list[dict[str, Any]], forced: dict[str, str] | None = None) -> Mapping:
    """The proposed mapping of ``rows`` (``forced``: column -> path the user gave)."""
    stats = _stats(rows)
    n = len(rows)
    taken: set[str] = set()
    proposals: dict[str, Proposal] = {}
    for column, path in (forced or {}).items():
        st = stats.get(path)
        if st is None:
            raise ConfigError(f"init: --field {column}={path}: no sampled row has '{path}'")
        if column == "output" and st.share("text") < 0.5:
            raise ConfigError(_object_output(path, st, stats))
        proposals[column] = Proposal(column, path, st.example, False, "given")
        taken.add(path)
    for role in _ROLES:
        if role.column in proposals:
            continue
        fits = []
        pool, size = stats, n
        if role.column == "input" and "output" in proposals:
            pool, size = _answered(rows, proposals["output"].path, stats)
        for path, st in pool.items():
            if path in taken or any(path.startswith(t + ".") for t in taken
                                    if stats[t].share("messages") > 0):
                continue
            fit = _score(role, path, st, size)
            if fit is not None:
                fits.append((fit[0], fit[1], path))
        # best first (the first path found wins a tie); a level or user action whose values
        # read as neither gives way to the next path (stop_reason beside an HTTP status)
        for _, sure, path in sorted(fits, key=lambda f: -f[0]):
            proposal = _proposal(role.column, path, pool[path], sure)
            if proposal is not None:
                proposals[role.column] = proposal
                taken.add(path)
                break
    if "output" not in proposals:
        raise ConfigError(_no_output(stats))
    proposals["output"] = _whole_reply(proposals["output"], stats, forced or {})
    for side in ("input", "output"):  # some rows chat-shaped: read as chat (in fields)
        st = stats.get(proposals[side].path) if side in proposals else None
        if st is not None and st.chat:
            proposals[side] = dataclasses.replace(proposals[side], message=True)
    taken.add(proposals["output"].path)  # (the message, when it is read whole)
    unread, said = _unreadable(rows, proposals, forced or {})
    rid = proposals.get("record_id")
    if rid is not None and "record_id" not in (forced or {}) and stats[rid.path].present < n:
        # a line with no id would be a reject: a failed call's bare {"error": ...} envelope
        # lost from the failure rate, where a file-and-line id keeps it a record
        del proposals["record_id"]
        unread.append(f"not mapped: record_id: {rid.path} is missing in "
                      f"{n - stats[rid.path].present} of {n} sampled rows; records are named "
                      "by file and line")
    # leaves no proposal reads, beside them or under them (objects are their leaves)
    unmapped = [(path, st.example) for path, st in stats.items()
                if st.share("object") < 1 and path not in taken and
                not any(path.startswith(t + ".") or t.startswith(path + ".") for t in taken)]
    tree = _tree(rows, proposals["output"].path)
    if tree is not None:
        unread.append(tree[2])
    scores = _scores_list(stats, taken)
    if scores is not None:
        unmapped = [(p, e) for p, e in unmapped if p != scores and
                    not p.startswith(scores + ".")]
        unread.append(f"imported scores: {scores} (each item's name and value or label): "
                      "judgments with origin 'imported', audited like evalkit's own")
    return Mapping(proposals, unmapped, n, unread + _notes(stats, proposals, said),
                   tree[:2] if tree is not None else None, scores)


def _scores_list(stats: dict[str, _Stat], taken: set[str]) -> str | None:
    """The path of a list of scores another evaluator gave each row (a Langfuse export's
    ``scores``: objects with a name and a value or label), else None."""
    for path, st in sorted(stats.items(), key=lambda ps: -ps[1].present):
        words = {w for s in _words(path) for w in s}
        example = st.example
        if path in taken or st.share("list") < 0.8 or st.of_many or not words & {
                "scores", "score", "evaluations", "evals", "feedback", "grades"} or \
                not isinstance(example, list) or not example:
            continue
        if all(isinstance(s, dict) and isinstance(s.get("name"), str) and any(
                s.get(k) is not None for k in ("value", "label", "stringValue"))
               for s in example):
            return path
    return None


_PARENT_KEYS = ("parent_run_id", "parent_id", "parent_observation_id", "parent_span_id")


def _tree(rows: list[dict[str, Any]], output: str) -> tuple[str, str, str] | None:
    """When the rows are runs of a tree (a top-level parent id, set in some rows) and the
    output is in one level only (a LangSmith export: the root chain run holds the answer,
    its child LLM run generations), the sql predicate and reason that set the other level
    aside, and the note that says so; else ``None``. Each row is a record: a child run read
    at the root's output path would be a failed call (no output)."""
    keys = {k for row in rows for k in row if isinstance(k, str)}
    parent = next((k for k in keys if "_".join(w for s in _words(k) for w in s)
                   in _PARENT_KEYS), None)
    if parent is None:
        return None
    parts = parts_of(output)
    child = [walk(row, parts) is not None for row in rows if row.get(parent) is not None]
    root = [walk(row, parts) is not None for row in rows if row.get(parent) is None]
    if not child or not root:
        return None
    has = {"child": sum(child) / len(child), "root": sum(root) / len(root)}
    lacking = next((side for side, other in (("child", "root"), ("root", "child"))
                    if has[side] <= 0.1 and has[other] >= 0.5), None)
    if lacking is None:
        return None
    test = "IS NOT NULL" if lacking == "child" else "IS NULL"
    where = f"json_extract_string(metadata, '$.\"{parent}\"') {test}"
    what = f"a child run ({parent} set)" if lacking == "child" else f"a root run (no {parent})"
    reason = f"{what}: the output is in the runs with {'none' if lacking == 'child' else 'one'}"
    count = len(child) if lacking == "child" else len(root)
    note = (f"set aside: {count} of {len(rows)} sampled rows are "
            f"{'children' if lacking == 'child' else 'roots'} ({parent} "
            f"{'set' if lacking == 'child' else 'null'}) without {output}: each row is a "
            "record, and those would read as failed calls; the experiment sets them aside "
            "with an sql filter before pipeline_failure")
    return where, reason, note


def _answered(rows: list[dict[str, Any]], output: str,
              stats: dict[str, _Stat]) -> tuple[dict[str, _Stat], int]:
    """What the rows holding an output hold, and how many they are, where the prompt is
    looked for: in a file of several kinds of row (a Langfuse export's retrieval spans beside
    its generations) the other rows' inputs are not the judged ones'."""
    answered = [row for row in rows if walk(row, parts_of(output)) is not None]
    if not answered or len(answered) == len(rows):
        return stats, len(rows)
    return _stats(answered), len(answered)


def _unreadable(rows: list[dict[str, Any]], proposals: dict[str, Proposal],
                forced: dict[str, str]) -> tuple[list[str], set[str]]:
    """Each numeric or time column whose sampled values the source cannot read (day-first
    dates, numbers with a unit: each such row would be a reject, a record lost for its
    timestamp) is left out when that is most of them, else said with the count: the notes,
    and the columns left out."""
    notes: list[str] = []
    said: set[str] = set()
    for col, p in list(proposals.items()):
        typ = RECORDS.field(col).type
        if col == "record_id" or pa.types.is_string(typ):
            continue
        read, table = coercer(typ), {spec_key(k): v for k, v in (p.value_map or {}).items()}
        values = [v for v in (walk(row, parts_of(p.path)) for row in rows)
                  if v is not None and not (isinstance(v, str) and not v.strip())]
        failed: list[tuple[Any, str]] = []
        for v in values:
            try:
                read(table.get(spec_key(v), v))
            except BadValue as exc:
                failed.append((v, str(exc).partition(", got ")[0]))
        if not failed:
            continue
        count = f"{len(failed)} of {len(values)} sampled rows"
        example = f"{str(failed[0][0])[:40]!r}: {failed[0][1]}"
        if 2 * len(failed) > len(values) and col not in forced:
            del proposals[col]
            said.add(col)
            notes.append(f"not mapped: {col}: {p.path} holds values the source cannot read: "
                         f"{count} (e.g. {example}); each would be a reject: convert them, "
                         f"or map it anyway with --field {col}={p.path}")
        else:
            notes.append(f"check {col}: {count} would be "
                         f"{'a reject' if len(failed) == 1 else 'rejects'} ({example})")
    return notes, said


def _whole_reply(output: Proposal, stats: dict[str, _Stat],
                 forced: dict[str, str]) -> Proposal:
    """The output read from the assistant message (``choices.0.message``) rather than its
    ``content``: the source reads a message as its text, or as its tool calls when it has
    no text, where ``content`` is null and the call would be set aside as a failed one."""
    parent, _, leaf = output.path.rpartition(".")
    st = stats.get(parent)
    # only a step named message: a whole response object (Anthropic's, with a role) is an
    # error object in the rows of failed calls, where its content is null as it should be
    if "output" in forced or leaf != "content" or not parent.endswith("message") or \
            st is None or st.share("object") < 1 or not isinstance(st.example, dict) or \
            st.example.get("role") not in ("assistant", "model", "ai"):
        return output
    return Proposal("output", parent, output.example, output.guess,
                    "the assistant message: its text, or its tool calls", message=True)


def _notes(stats: dict[str, _Stat], proposals: dict[str, Proposal],
           said: set[str]) -> list[str]:
    """Why a column the data seems to hold was not mapped (``said``: the columns a note gave
    the reason for already)."""
    notes = []
    for column in ("input", "output"):
        example = proposals[column].example if column in proposals else None
        if _python_literal(example):
            notes.append(f"check {column}: {proposals[column].path} holds Python's printout of a "
                         "list or dict (single quotes), not JSON: it is read as that text, "
                         "not as messages; write the file with json.dumps (pandas: to_json) "
                         "to have it read as messages")
    said = set(said)  # columns a note says why they are not mapped
    if "latency_s" not in proposals:
        def ends(word: str) -> list[str]:
            return [p for p in stats if {word} & {w for st in _words(p) for w in st}
                    and stats[p].share("number", "text") >= 0.8]
        start, end = ends("start"), ends("end")
        if start and end:
            notes.append(f"not mapped: latency_s: the rows have a start ({start[0]}) and an end "
                         f"({end[0]}) but no duration, and fields do not subtract; add a "
                         "duration to the file, or leave latency out")
            said.add("latency_s")
    # the columns most metrics read, said when absent (not only left out of the mapping)
    lacking = [c for c in ("input", "reference", "model", "latency_s", "cost_usd")
               if c not in proposals and c not in said]
    if lacking:
        why = ""
        if "input" in lacking and "custom_id" in stats:
            why = ("; an OpenAI Batch output holds no prompt: it is in the batch's input file, "
                   "matched by custom_id")
        notes.append(f"not found in the sampled rows: {', '.join(lacking)} (the metrics that "
                     f"read them are left out; give one with --field COLUMN=PATH){why}")
    return notes


def _proposal(column: str, path: str, st: _Stat, sure: bool) -> Proposal | None:
    """``column`` read from ``path``, with the transforms its values need; ``None`` when a
    level or user action cannot be read from them."""
    if column == "latency_s":
        scale, guessed, why = _latency(path, st)
        return Proposal(column, path, st.example, not sure or guessed, why, scale)
    if column == "cost_usd":
        words = {w for s in _words(path) for w in s}
        scale, unit = (0.01, "cents") if words & {"cent", "cents"} else \
            (1e-6, "millionths of a dollar") if words & {"micros", "microdollars"} else \
            (None, "")
        return Proposal(column, path, st.example, not sure, unit and f"{unit} (by its name)",
                        scale)
    if column == "level":
        found = _level_map(st, path)
        if found is None:
            return None
        value_map, guessed, why = found
        return Proposal(column, path, st.example, not sure or guessed, why,
                        value_map=value_map)
    if column == "user_action":
        action = _action_map(st, path)
        return None if action is None else \
            Proposal(column, path, st.example, True, value_map=action)
    if column == "context" and isinstance(st.example, list) and \
            not all(isinstance(v, str) for v in st.example):
        return None  # passages are texts; a list of objects is something else
    return Proposal(column, path, st.example, not sure)


def _python_literal(value: Any) -> bool:
    """Whether ``value`` is text that is a Python list or dict printed with ``str()`` (what
    pandas writes to a CSV for a list cell) rather than JSON."""
    if not isinstance(value, str) or value[:2] not in ("[{", "{'") or len(value) > 100_000:
        return False
    try:
        json.loads(value)
        return False
    except ValueError:
        pass
    import ast

    try:
        return isinstance(ast.literal_eval(value), (list, dict))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False


def _object_output(path: str, st: _Stat, stats: dict[str, _Stat]) -> str:
    texts = [p for p, s in stats.items() if p.startswith(path + ".") and s.share("text") >= 0.8]
    hint = f"; its text is at {', '.join(texts[:4])}" if texts else ""
    return (f"init: '{path}' holds {max(st.kinds, key=st.kinds.__getitem__)} values, not "
            f"text: an output mapped to it would be judged as JSON{hint}; give the text's "
            "path with --field output=PATH")


def _no_output(stats: dict[str, _Stat]) -> str:
    texts = sorted((p for p, s in stats.items() if s.share("text") >= 0.8),
                   key=lambda p: -statistics.mean(stats[p].lengths or [0]))
    objects = [p for p, s in stats.items() if s.share("object", "list") >= 0.8
               and any(w in ("output", "response", "completion") for st in _words(p)
                       for w in st)]
    what = (f"'{objects[0]}' is an object, not text (an output mapped to it would be "
            "judged as JSON); " if objects else "")
    return (f"init: found no path that holds the output text; {what}give it with --field "
            f"output=PATH (text paths, longest first: {', '.join(texts[:6]) or 'none'})")


def describe(value: Any, width: int = 48) -> str:
    """``value`` as one short line for the printed proposal."""
    if isinstance(value, list) and is_messages(value):
        value = langchain_messages(value)  # a batch of one conversation, serialized
        roles = ", ".join(str(m.get("role")) for m in value[:4])
        text = f"[{len(value)} messages: {roles}{', …' if len(value) > 4 else ''}]"
    else:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def io_text(mapping: Mapping) -> str:
    """The proposal as the lines ``evalkit init`` prints."""
    out = io.StringIO()
    out.write(f"sampled {mapping.n_rows} rows; proposed mapping (guesses marked ?):\n")
    width = max(len(c) for c in mapping.proposals)
    order = {c: i for i, c in enumerate(SHOWN)}
    for col, p in sorted(mapping.proposals.items(), key=lambda cp: order.get(cp[0], 99)):
        mark = "?" if p.guess else " "
        extra = []
        if p.scale is not None:
            extra.append(f"× {p.scale:g}")
        if p.value_map is not None:
            extra.append("map " + ", ".join(f"{spec_key(k)}→{v}" for k, v in
                                            list(p.value_map.items())[:4]))
        if p.why and p.why != "given":
            extra.append(p.why)
        tail = f"  ({'; '.join(extra)})" if extra else ""
        out.write(f" {mark} {col:<{width}}  {p.path}  e.g. {describe(p.example)}{tail}\n")
    if mapping.unmapped:
        shown = mapping.unmapped[:12]
        out.write("left unmapped (kept in metadata when top-level): " +
                  ", ".join(p for p, _ in shown) +
                  (f" … and {len(mapping.unmapped) - 12} more" if len(mapping.unmapped) > 12
                   else "") + "\n")
    for note in mapping.notes:
        out.write(f"{note}\n")
    return out.getvalue()
