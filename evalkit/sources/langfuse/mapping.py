"""From Langfuse objects (v1 and v2 observations, v1 traces, v2 and v3 scores) to evalkit
records and judgments. Both API generations map into the same records:

- ``output``/``input``: v1 returns parsed JSON, v2 the raw stored string; a string stays as it
  is and anything else becomes its JSON text, so ``pipeline_failure`` sees the same text;
- ``latency_s``: the server's ``latency`` (seconds), else end - start;
- tokens from ``usageDetails`` (else the deprecated ``usage``), cost from
  ``costDetails.total`` (else ``totalCost``/``calculatedTotalCost``), null when absent: a
  missing price is unknown, never 0.

A v2 page is first decoded by msgspec straight into structs of the keys the mapping reads
(:func:`typed_page_columns`): no dict per observation, the other keys skipped unparsed, the
same columns. A page it declines (odd types, integers beyond 64 bits) is parsed by orjson and
mapped from its dicts (:func:`observation_columns`), as every v1 object is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec
import orjson
import pyarrow as pa

from evalkit._time import iso_time
from evalkit.results.schemas import RECORDS, json_text

__all__ = [
    "OBSERVATION_COLUMNS", "TIMESTAMP", "TRACE_COLUMNS", "V2_FIELDS", "iso", "judgment",
    "observation_columns", "parse_time", "score", "timestamps", "trace_columns",
    "typed_page_columns", "v2_fields",
]

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


def _costs(details: list[Any], total_costs: list[Any], calculated: list[Any]
           ) -> list[float | None]:
    """``costDetails.total``, else the sum of ``costDetails``, else ``totalCost`` or
    ``calculatedTotalCost`` (one value of each per object)."""
    return [c if type(d) is dict and type(c := d.get("total")) is float else _cost(d, t, ct)
            for d, t, ct in zip(details, total_costs, calculated, strict=True)]


def _cost(details: Any, total_cost: Any, calculated: Any) -> float | None:
    if isinstance(details, Mapping) and details:
        total = _number(details.get("total"))
        if total is not None:
            return total
        parts = [_number(v) for v in details.values()]
        if parts and all(p is not None for p in parts):
            return float(sum(parts))  # type: ignore[arg-type]
    for value in (total_cost, calculated):
        number = _number(value)
        if number is not None:
            return number
    return None


def _latencies(latencies: list[Any], starts: list[Any], ends: list[Any]) -> list[float | None]:
    """The server's ``latency``, else end - start."""
    out = [v if type(v) is float else _number(v) for v in latencies]
    for i, latency in enumerate(out):
        if latency is None:
            end = parse_time(ends[i])
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


def _metadata(values: Callable[[str], list[Any]], fields: tuple[tuple[str, str], ...],
              extra: Mapping[str, Any] | None = None, typed: bool = False) -> list[str | None]:
    """The ``metadata`` column: each object's ``fields`` that are not null, renamed, plus
    ``extra``, as JSON text. ``typed``: the values come from msgspec, which reads an integer
    beyond 64 bits as an int where orjson reads a float; orjson cannot write that int, and the
    page is then mapped from orjson's values instead (:func:`typed_page_columns`)."""
    columns = [(key, values(field)) for field, key in fields]
    n = len(columns[0][1])
    # a field null in every object is in no object's metadata
    columns = [(key, column) for key, column in columns if column.count(None) < n]
    keys = [key for key, _ in columns]
    rows = list(zip(*[column for _, column in columns], strict=True)) if columns else [()] * n
    dumps = orjson.dumps
    if columns and not extra and not any(None in column for _, column in columns):
        # every object has the same keys: its dict and its text are made in C
        try:
            return list(map(bytes.decode, map(dumps, map(dict, map(zip, repeat(keys), rows)))))
        except TypeError:
            if typed:
                raise
    out = []
    for row in rows:
        meta = {}
        for key, value in zip(keys, row, strict=True):  # cheaper than a comprehension
            if value is not None:
                meta[key] = value
        if extra:
            meta.update(extra)
        try:  # parsed JSON needs none of json_text's options, which cost a third more
            out.append(dumps(meta).decode())
        except TypeError:
            if typed:
                raise
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
    models = [obs.get("providedModelName", obs.get("model")) for obs in items]
    return _observation_columns(ids, lambda key: [obs.get(key) for obs in items], models,
                                as_trace, extra, typed=False)


def _observation_columns(ids: list[str], values: Callable[[str], list[Any]],
                         models: list[Any], as_trace: bool, extra: Mapping[str, Any] | None,
                         typed: bool) -> dict[str, Any]:
    """The record columns from ``values(key)``: the value of ``key`` in every object (null
    when absent), however the objects were decoded."""
    starts = values("startTime")
    timestamp = timestamps(starts)
    trace_ids = values("traceId")
    if as_trace and not all(trace_ids):
        raise ValueError("root observation has no traceId")
    usage = [u or v for u, v in zip(values("usageDetails"), values("usage"), strict=True)]
    return {
        "record_id": trace_ids if as_trace else ids,
        "trace_id": trace_ids,
        "observation_id": ids,
        "session_id": values("sessionId"),
        "timestamp": timestamp,
        "model": models,
        "level": values("level"),
        "status_message": values("statusMessage"),
        "input": [json_text(v) for v in values("input")],
        "output": [json_text(v) for v in values("output")],
        "latency_s": _latencies(values("latency"), starts, values("endTime")),
        "cost_usd": _costs(values("costDetails"), values("totalCost"),
                           values("calculatedTotalCost")),
        "input_tokens": _tokens(usage, _INPUT_KEYS),
        "output_tokens": _tokens(usage, _OUTPUT_KEYS),
        "tags": values("tags"),
        "metadata": _metadata(values, _OBSERVATION_META, extra, typed),
    }


# The keys of an observation that _observation_columns reads, decoded by msgspec straight into
# a struct (no dict of the ~40 keys a v2 observation has; the others are skipped unparsed).
# ``id`` must be a string, ``input``/``output`` strings or null (v2 sends the raw stored text;
# an object there would be written back out by json_text, where msgspec's and orjson's reading
# of an integer beyond 64 bits differ); any other value is decoded as orjson decodes it (the
# same dicts, lists, strings, numbers) and mapped by the same functions.
# ``providedModelName`` is UNSET when absent: then ``model`` names the model (v1).
_TYPED_KEYS = ("startTime", "traceId", "usageDetails", "usage", "sessionId", "model", "level",
               "statusMessage", "latency", "endTime", "costDetails", "totalCost",
               "calculatedTotalCost", "tags", *(field for field, _ in _OBSERVATION_META))
_TYPED_FIELDS = {"id": (str,), "input": (str | None, None), "output": (str | None, None),
                 "providedModelName": (Any, msgspec.UNSET),
                 **{key: (Any, None) for key in _TYPED_KEYS}}


@lru_cache(maxsize=16)
def _page_decoder(order: tuple[str, ...]) -> msgspec.json.Decoder:
    """A decoder of v2 pages into structs of :data:`_TYPED_FIELDS`, declared in the order the
    server sends its keys (``order``: the keys of a page's first observation), then the rest.
    The order changes no value: msgspec looks each key up from the field after the last one
    it found, so keys that come in field order are found at the first compare (a page decodes
    in a sixth fewer instructions than with the fields in any other order)."""
    rank = {key: i for i, key in enumerate(order)}
    fields = sorted(_TYPED_FIELDS, key=lambda key: rank.get(key, len(rank)))
    observation = msgspec.defstruct(
        "_TypedObservation", [(key, *_TYPED_FIELDS[key]) for key in fields], kw_only=True,
        gc=False)  # holds no cycles: the collector need not track a thousand per page
    page = msgspec.defstruct("_TypedPage", [("data", list[observation])], gc=False)
    return msgspec.json.Decoder(page)


_PAGE_START = re.compile(rb'\s*\{\s*"data"\s*:\s*\[\s*')
_FIRST_OBJECT = json.JSONDecoder().raw_decode


def _key_order(body: bytes) -> tuple[str, ...]:
    """The keys of a page's first observation, in the order the server sends them (``()``
    when the body does not start as a page does, or the first object is not read whole from
    its first 16 KiB)."""
    match = _PAGE_START.match(body)
    if match is None:
        return ()
    try:
        first, _ = _FIRST_OBJECT(body[match.end():match.end() + 16384].decode(
            "utf-8", "replace"))
    except ValueError:
        return ()
    return tuple(first) if type(first) is dict else ()


_TYPED_ERRORS = (msgspec.DecodeError, ValueError, TypeError, AttributeError, OverflowError,
                 RecursionError)


def typed_page_columns(body: bytes, as_trace: bool = False) -> dict[str, Any] | None:
    """The record columns of a v2 page of observations (its JSON body), decoded by msgspec into
    structs of the keys the mapping reads; the same columns :func:`observation_columns` gives
    for the page's ``data`` parsed by orjson. ``None`` when the page is not decoded or mapped
    whole this way (not a page of objects with string ids, an object or non-string
    ``input``/``output``, a value that does not map): the caller maps it from orjson's parse,
    which behaves exactly as before on whatever is odd about it."""
    try:
        items = _page_decoder(_key_order(body)).decode(body).data
        ids = list(map(attrgetter("id"), items))
        if not all(ids):
            return None  # an empty id: observation_columns says which
        models = [m if p is msgspec.UNSET else p for p, m in zip(
            map(attrgetter("providedModelName"), items), map(attrgetter("model"), items),
            strict=True)]
        return _observation_columns(ids, lambda key: list(map(attrgetter(key), items)),
                                    models, as_trace, None, typed=True)
    except _TYPED_ERRORS:
        return None


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
        "metadata": _metadata(lambda key: [trace.get(key) for trace in items],
                              _TRACE_META),
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
