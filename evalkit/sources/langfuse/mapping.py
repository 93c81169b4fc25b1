"""From Langfuse objects (v1 and v2 observations, v1 traces, v2 and v3 scores) to evalkit
records and judgments. Both API generations map into the same records:

- ``output``/``input``: v1 returns parsed JSON, v2 the raw stored string; a string stays as it
  is and anything else becomes its JSON text, so ``pipeline_failure`` sees the same text;
- ``latency_s``: the server's ``latency`` (seconds), else end - start;
- tokens from ``usageDetails`` (else the deprecated ``usage``), cost from
  ``costDetails.total`` (else ``totalCost``/``calculatedTotalCost``), null when absent: a
  missing price is unknown, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import orjson
import pyarrow as pa

from evalkit._time import iso_time
from evalkit.results.schemas import RECORDS, json_text

# v2 field groups the source asks for: everything a record needs; the group ``time`` only
# when a custom field reads from it (otherwise a sixth of each page, parsed for nothing)
V2_FIELDS = "core,basic,io,metadata,model,usage,prompt,metrics,trace_context"
_TIME_GROUP = ("completionStartTime", "createdAt", "updatedAt")


def v2_fields(paths: Iterable[str]) -> str:
    """The v2 field groups to ask for when custom fields read ``paths``."""
    if any(path.split(".")[0] in _TIME_GROUP for path in paths):
        return f"{V2_FIELDS},time"
    return V2_FIELDS

# the record columns each mapping fills
OBSERVATION_COLUMNS = ("record_id", "trace_id", "observation_id", "session_id", "timestamp",
                       "model", "level", "status_message", "input", "output", "latency_s",
                       "cost_usd", "input_tokens", "output_tokens", "tags", "metadata")
TRACE_COLUMNS = ("record_id", "trace_id", "session_id", "timestamp", "input", "output",
                 "latency_s", "cost_usd", "tags", "metadata")
_INPUT_KEYS = ("input", "promptTokens", "input_tokens", "prompt_tokens")
_OUTPUT_KEYS = ("output", "completionTokens", "output_tokens", "completion_tokens")
TIMESTAMP = RECORDS.field("timestamp").type


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 timestamp from the API as an aware datetime (``None`` stays ``None``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 timestamp, got {type(value).__name__}")
    return iso_time(value)


def timestamps(values: list[Any]) -> pa.Array:
    """A ``timestamp`` column from ISO-8601 strings. Arrow parses the usual forms (an offset or
    ``Z``) in one call and gives the instant :func:`parse_time` gives; when it refuses any
    value (no offset, 9 fraction digits, a week date, not a string), every value goes through
    :func:`parse_time`, which raises on what is not a timestamp."""
    try:
        return pa.array(values, pa.string()).cast(TIMESTAMP)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([parse_time(v) for v in values], TIMESTAMP)


def iso(ts: datetime) -> str:
    """The form Langfuse accepts in ``fromStartTime`` and friends (UTC, milliseconds, Z)."""
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _number(value: Any) -> float | None:
    # v2 sends prices as decimal strings
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _tokens(usage: list[Any], keys: tuple[str, ...]) -> list[int | None]:
    """Token counts from usage objects: the first of ``keys`` that holds a number."""
    first = keys[0]
    return [n if type(u) is dict and type(n := u.get(first)) is int else _token_count(u, keys)
            for u in usage]


def _token_count(details: Any, keys: tuple[str, ...]) -> int | None:
    if not isinstance(details, Mapping):
        return None
    for key in keys:
        value = details.get(key)
        if type(value) is int or type(value) is float:  # not bool
            return int(value)
    return None


def _costs(items: list[Mapping[str, Any]]) -> list[float | None]:
    """``costDetails.total``, else the sum of ``costDetails``, else ``totalCost`` or
    ``calculatedTotalCost``."""
    return [c if type(d := obs.get("costDetails")) is dict and type(c := d.get("total")) is float
            else _cost(obs) for obs in items]


def _cost(obs: Mapping[str, Any]) -> float | None:
    details = obs.get("costDetails")
    if isinstance(details, Mapping) and details:
        total = _number(details.get("total"))
        if total is not None:
            return total
        parts = [_number(v) for v in details.values()]
        if parts and all(p is not None for p in parts):
            return float(sum(parts))  # type: ignore[arg-type]
    for key in ("totalCost", "calculatedTotalCost"):
        value = _number(obs.get(key))
        if value is not None:
            return value
    return None


def _latencies(items: list[Mapping[str, Any]], starts: list[Any]) -> list[float | None]:
    """The server's ``latency``, else end - start."""
    out = [v if type(v := obs.get("latency")) is float else _number(v) for obs in items]
    for i, latency in enumerate(out):
        if latency is None:
            end = parse_time(items[i].get("endTime"))
            start = parse_time(starts[i])
            if start is not None and end is not None:
                out[i] = (end - start).total_seconds()
    return out


_OBSERVATION_META = (("name", "name"), ("type", "type"), ("environment", "environment"),
                     ("version", "version"), ("parentObservationId", "parent_observation_id"),
                     ("promptName", "prompt_name"), ("promptVersion", "prompt_version"),
                     ("modelParameters", "model_parameters"), ("traceName", "trace_name"),
                     ("userId", "user_id"), ("metadata", "metadata"))
_TRACE_META = (("name", "name"), ("environment", "environment"), ("release", "release"),
               ("version", "version"), ("userId", "user_id"), ("metadata", "metadata"))


def _metadata(items: list[Mapping[str, Any]], fields: tuple[tuple[str, str], ...],
              extra: Mapping[str, Any] | None = None) -> list[str | None]:
    """The ``metadata`` column: each object's ``fields`` that are not null, renamed, plus
    ``extra``, as JSON text."""
    out = []
    dumps = orjson.dumps
    for obj in items:  # a plain loop: a comprehension per object costs twice as much
        get = obj.get
        meta = {}
        for field, key in fields:
            value = get(field)
            if value is not None:
                meta[key] = value
        if extra:
            meta.update(extra)
        try:  # parsed JSON needs none of json_text's options, which cost a third more
            out.append(dumps(meta).decode())
        except TypeError:
            out.append(json_text(meta))
    return out


def _ids(items: list[Any], what: str) -> list[str]:
    """The ``id`` of each item, checking that every item is an object with a string id."""
    for obj in items:
        if type(obj) is not dict and not isinstance(obj, Mapping):
            raise ValueError(f"expected an object, got {type(obj).__name__}")
    ids = [obj.get("id") for obj in items]
    for obj_id in ids:
        if not isinstance(obj_id, str) or not obj_id:
            raise ValueError(f"{what} has no id")
    return ids


def observation_columns(items: list[Any], as_trace: bool = False,
                        extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record columns of v1 (``ObservationsView``) or v2 (``ObservationV2``) observations:
    one list per column, ``timestamp`` as an Arrow array. ``as_trace`` makes root observations
    stand for their traces (record id = trace id); ``extra`` goes into every ``metadata``.
    Raises ``ValueError`` (or ``TypeError``) when any item cannot be mapped: the caller maps
    the items one at a time to find which."""
    ids = _ids(items, "observation")
    starts = [obs.get("startTime") for obs in items]
    timestamp = timestamps(starts)
    trace_ids = [obs.get("traceId") for obs in items]
    if as_trace and not all(trace_ids):
        raise ValueError("root observation has no traceId")
    usage = [obs.get("usageDetails") or obs.get("usage") for obs in items]
    return {
        "record_id": trace_ids if as_trace else ids,
        "trace_id": trace_ids,
        "observation_id": ids,
        "session_id": [obs.get("sessionId") for obs in items],
        "timestamp": timestamp,
        "model": [obs.get("providedModelName", obs.get("model")) for obs in items],
        "level": [obs.get("level") for obs in items],
        "status_message": [obs.get("statusMessage") for obs in items],
        "input": [json_text(obs.get("input")) for obs in items],
        "output": [json_text(obs.get("output")) for obs in items],
        "latency_s": _latencies(items, starts),
        "cost_usd": _costs(items),
        "input_tokens": _tokens(usage, _INPUT_KEYS),
        "output_tokens": _tokens(usage, _OUTPUT_KEYS),
        "tags": [obs.get("tags") for obs in items],
        "metadata": _metadata(items, _OBSERVATION_META, extra),
    }


def trace_columns(items: list[Any]) -> dict[str, Any]:
    """The record columns of v1 traces (``TraceWithDetails``), as
    :func:`observation_columns` gives them."""
    ids = _ids(items, "trace")
    return {
        "record_id": ids,
        "trace_id": ids,
        "session_id": [trace.get("sessionId") for trace in items],
        "timestamp": timestamps([trace.get("timestamp") for trace in items]),
        "input": [json_text(trace.get("input")) for trace in items],
        "output": [json_text(trace.get("output")) for trace in items],
        "latency_s": [_number(trace.get("latency")) for trace in items],
        "cost_usd": [_number(trace.get("totalCost")) for trace in items],
        "tags": [trace.get("tags") for trace in items],
        "metadata": _metadata(items, _TRACE_META),
    }


def score(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v2 (flat ids) or v3 (``subject``) score, normalised to one shape."""
    subject = raw.get("subject") or {}
    kind = subject.get("kind")
    obs_id = raw.get("observationId") or (subject.get("id") if kind == "observation" else None)
    trace_id = raw.get("traceId") or subject.get("traceId") or (
        subject.get("id") if kind == "trace" else None)
    if not isinstance(raw.get("id"), str) or not isinstance(raw.get("name"), str):
        raise ValueError("score has no id or name")
    return {
        "id": raw["id"], "name": raw["name"], "data_type": raw.get("dataType"),
        "value": raw.get("value"), "string_value": raw.get("stringValue"),
        "comment": raw.get("comment"), "observation_id": obs_id, "trace_id": trace_id,
        "session_id": raw.get("sessionId") or (subject.get("id") if kind == "session" else None),
        "timestamp": raw.get("timestamp"), "source": raw.get("source"),
        "config_id": raw.get("configId"), "metadata": raw.get("metadata"),
        "author_user_id": raw.get("authorUserId"),
    }


def judgment(sc: Mapping[str, Any], record_id: str) -> dict[str, Any]:
    """An imported judgment (``origin='imported'``) from a normalised score. Both generations
    give the same row: BOOLEAN → ``value`` 1/0 and ``passed``; CATEGORICAL, TEXT and
    CORRECTION → ``label`` only (v2's number for a category without a config is 0, not a
    score); NUMERIC → ``value``."""
    data_type, raw, string_value = sc["data_type"], sc["value"], sc["string_value"]
    value: float | None = None
    label: str | None = None
    passed: bool | None = None
    if data_type == "BOOLEAN":
        if isinstance(raw, (bool, int, float)):
            passed = bool(raw)
        elif string_value in ("True", "False"):
            passed = string_value == "True"
        value = None if passed is None else float(passed)
    elif data_type in ("CATEGORICAL", "TEXT", "CORRECTION"):
        label = raw if isinstance(raw, str) else string_value
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = float(raw)
    row: dict[str, Any] = {
        "record_id": record_id, "judge": sc["name"], "plugin": "langfuse",
        "value": value, "label": label, "passed": passed, "explanation": sc["comment"],
        "details": {k: sc[k] for k in ("id", "data_type", "source", "timestamp", "config_id",
                                       "metadata", "author_user_id", "trace_id",
                                       "observation_id", "session_id") if sc.get(k) is not None},
    }
    if value is None and label is None:
        row.update(status="error", error=f"score {sc['id']} ({data_type}) has no usable value")
    return row
