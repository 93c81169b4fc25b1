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

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from evalkit.sources._mapping import json_text

# v2 field groups the source asks for: everything a record needs
V2_FIELDS = "core,basic,time,io,metadata,model,usage,prompt,metrics,trace_context"

# the record columns each mapping fills
OBSERVATION_COLUMNS = ("record_id", "trace_id", "observation_id", "session_id", "timestamp",
                       "model", "level", "status_message", "input", "output", "latency_s",
                       "cost_usd", "input_tokens", "output_tokens", "tags", "metadata")
TRACE_COLUMNS = ("record_id", "trace_id", "session_id", "timestamp", "input", "output",
                 "latency_s", "cost_usd", "tags", "metadata")
_INPUT_KEYS = ("input", "promptTokens", "input_tokens", "prompt_tokens")
_OUTPUT_KEYS = ("output", "completionTokens", "output_tokens", "completion_tokens")


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 timestamp from the API as an aware datetime (``None`` stays ``None``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 timestamp, got {type(value).__name__}")
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def iso(ts: datetime) -> str:
    """The form Langfuse accepts in ``fromStartTime`` and friends (UTC, milliseconds, Z)."""
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def text(value: Any) -> str | None:
    """A cell for ``input``/``output``: strings as they are, other JSON as compact JSON text
    (as ``JSON.stringify`` writes it, which is how most SDKs log)."""
    return None if value is None else json_text(value)


def _number(value: Any) -> float | None:
    # v2 sends prices as decimal strings
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _tokens(details: Any, keys: tuple[str, ...]) -> int | None:
    if not isinstance(details, Mapping):
        return None
    for key in keys:
        value = details.get(key)
        if type(value) is int or type(value) is float:  # not bool
            return int(value)
    return None


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


def _latency(obs: Mapping[str, Any], start: datetime | None) -> float | None:
    latency = _number(obs.get("latency"))
    if latency is not None:
        return latency
    end = parse_time(obs.get("endTime"))
    return (end - start).total_seconds() if start is not None and end is not None else None


_META_FIELDS = (("name", "name"), ("type", "type"), ("environment", "environment"),
                ("version", "version"), ("parentObservationId", "parent_observation_id"),
                ("promptName", "prompt_name"), ("promptVersion", "prompt_version"),
                ("modelParameters", "model_parameters"), ("traceName", "trace_name"),
                ("userId", "user_id"), ("metadata", "metadata"))


def _metadata(obs: Mapping[str, Any], extra: Mapping[str, Any] | None) -> str:
    meta = {key: value for field, key in _META_FIELDS
            if (value := obs.get(field)) is not None}
    if extra:
        meta.update(extra)
    return json_text(meta)


def observation_record(obs: Mapping[str, Any], as_trace: bool = False,
                       extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One record from a v1 (``ObservationsView``) or v2 (``ObservationV2``) observation.
    ``as_trace`` makes a root observation stand for its trace (record id = trace id)."""
    obs_id = obs.get("id")
    if not isinstance(obs_id, str) or not obs_id:
        raise ValueError("observation has no id")
    start = parse_time(obs.get("startTime"))
    usage = obs.get("usageDetails") or obs.get("usage")
    trace_id = obs.get("traceId")
    if as_trace and not trace_id:
        raise ValueError("root observation has no traceId")
    return {
        "record_id": trace_id if as_trace else obs_id,
        "trace_id": trace_id,
        "observation_id": obs_id,
        "session_id": obs.get("sessionId"),
        "timestamp": start,
        "model": obs.get("providedModelName", obs.get("model")),
        "level": obs.get("level"),
        "status_message": obs.get("statusMessage"),
        "input": text(obs.get("input")),
        "output": text(obs.get("output")),
        "latency_s": _latency(obs, start),
        "cost_usd": _cost(obs),
        "input_tokens": _tokens(usage, _INPUT_KEYS),
        "output_tokens": _tokens(usage, _OUTPUT_KEYS),
        "tags": obs.get("tags"),
        "metadata": _metadata(obs, extra),
    }


def trace_record(trace: Mapping[str, Any]) -> dict[str, Any]:
    """One record from a v1 trace (``TraceWithDetails``)."""
    trace_id = trace.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError("trace has no id")
    meta = {"name": trace.get("name"), "environment": trace.get("environment"),
            "release": trace.get("release"), "version": trace.get("version"),
            "user_id": trace.get("userId"), "metadata": trace.get("metadata")}
    return {
        "record_id": trace_id,
        "trace_id": trace_id,
        "session_id": trace.get("sessionId"),
        "timestamp": parse_time(trace.get("timestamp")),
        "input": text(trace.get("input")),
        "output": text(trace.get("output")),
        "latency_s": _number(trace.get("latency")),
        "cost_usd": _number(trace.get("totalCost")),
        "tags": trace.get("tags"),
        "metadata": json_text({k: v for k, v in meta.items() if v is not None}),
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
