"""From parsed input rows (dicts) to record batches: field mapping, type checks, rejects,
duplicate ids and imported scores. Shared by the file sources.

Rows are gathered as parsed and mapped column by column when a batch is flushed: each column is
extracted with one comprehension and converted by Arrow in one call; only a column whose fast
conversion fails is walked value by value to coerce what can be coerced and reject the rest.
A missing key and a JSON ``null`` are the same thing here: no value."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple

from evalkit._gc import gc_paused
from evalkit._time import iso_time
from evalkit.errors import ConfigError
from evalkit.paths import getter, parts_of, walk
from evalkit.plugin import ImportedScores, Reject
from evalkit.results.schemas import RECORDS, json_text
from evalkit.sources._chat import chat_column, with_messages
from evalkit.sources._transforms import field_spec

# columns a source may fill (the rest belong to the runner and the filters)
MAPPABLE = [f.name for f in RECORDS if f.name not in ("run_id", "excluded_by", "exclude_reason")]

FileRef = tuple[str, str]  # (path as given, file name)
Where = tuple[FileRef, int]  # (file, line number): formatted only when a row is rejected


def json_array(value: Any, path: str) -> str | None:
    """The reason for a line that is a JSON array of objects (a UI export written as one
    array: Langfuse's, LangSmith's), with the command that makes it JSONL; else None."""
    if not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
        return None
    return (f"a JSON array of {len(value)} objects on one line, not one object a line (JSONL); "
            f"make it JSONL: jq -c '.[]' {path} > {path.removesuffix('.json')}.jsonl")


def location(where: Where) -> str:
    """``path:line`` for a reject."""
    return f"{where[0][0]}:{where[1]}"


def duplicate_id(rid: str, first: str) -> str:
    """The reject reason of a record whose id was first seen at ``first`` (``path:line``)."""
    return f"duplicate record id '{rid}' (first seen at {first})"


_RFC2822 = re.compile(r"\s*(?:[A-Za-z]{3},\s*)?\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d")


class BadValue(ValueError):
    """A value that cannot be coerced to its column's type."""


def _to_float(v: Any) -> float:
    if isinstance(v, bool):
        raise BadValue(f"expected a number, got {v!r}")
    if isinstance(v, (int, float)):
        out = float(v)
    elif isinstance(v, str):
        try:
            out = float(v)
        except ValueError:
            raise BadValue(f"expected a number, got {v[:40]!r}") from None
    else:
        raise BadValue(f"expected a number, got {type(v).__name__}")
    if not math.isfinite(out):
        # "NaN" and "Infinity" parse as floats, and a cost of inf made cost_per_success inf
        raise BadValue(f"expected a finite number, got {str(v)[:40]!r}")
    return out


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        raise BadValue(f"expected an integer, got {v!r}")
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    elif isinstance(v, str):
        try:
            v = int(v)
        except ValueError:
            raise BadValue(f"expected an integer, got {v[:40]!r}") from None
    if not isinstance(v, int):
        raise BadValue(f"expected an integer, got {v!r}")
    if not -(1 << 63) <= v < 1 << 63:
        raise BadValue(f"integer {v:.4g} is out of the 64-bit range")
    return v


def _to_list(v: Any) -> list[str]:
    if isinstance(v, str):
        if not v.startswith("["):
            return [v]
        try:
            v = orjson.loads(v)
        except orjson.JSONDecodeError:
            return [v]
    if isinstance(v, list):
        return [json_text(x) for x in v if x is not None]
    raise BadValue(f"expected a list of strings, got {type(v).__name__}")


def _to_timestamp(v: Any) -> datetime:
    if isinstance(v, bool):
        raise BadValue(f"expected a timestamp, got {v!r}")
    if isinstance(v, str):
        try:
            return iso_time(v)
        except ValueError:
            pass
        text = v
        try:  # a number written as text (a CSV cell is text): the epoch time it says
            v = float(v)
        except ValueError:
            return _http_date(text)
        if not math.isfinite(v) or abs(v) < 1e8:
            # a year ("2026") or a duration is no epoch time (1e8 s is March 1973)
            raise BadValue(f"expected an ISO-8601 timestamp or an epoch time, got "
                           f"{text[:40]!r}")
    if isinstance(v, (int, float)):
        # seconds since the epoch, or milli-, micro- or nanoseconds (OpenTelemetry's
        # startTimeUnixNano) when the number is too large to be the coarser unit
        scale = 1 if abs(v) < 1e11 else 1e3 if abs(v) < 1e14 else 1e6 if abs(v) < 1e17 else 1e9
        try:
            return datetime.fromtimestamp(v / scale, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise BadValue(f"timestamp {v!r} is out of range") from None
    raise BadValue(f"expected a timestamp, got {type(v).__name__}")


def _http_date(text: str) -> datetime:
    """An HTTP (RFC 2822) date, ``Mon, 24 Nov 2025 16:00:00 GMT``, which gateways log; dates
    of other forms are refused, ``01/11/2026`` too (day or month first cannot be told)."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text) if _RFC2822.match(text) else None
    except (TypeError, ValueError):
        when = None
    if when is None:
        raise BadValue(f"expected an ISO-8601 timestamp or an epoch time, got {text[:40]!r}")
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def coercer(typ: pa.DataType) -> Callable[[Any], Any]:
    """The function that coerces one parsed value to a record column of type ``typ`` (raising
    :class:`BadValue`); shared with the Langfuse source's custom fields."""
    if pa.types.is_string(typ):
        return json_text
    if pa.types.is_floating(typ):
        return _to_float
    if pa.types.is_integer(typ):
        return _to_int
    if pa.types.is_list(typ):
        return _to_list
    return _to_timestamp


def _fast_array(vals: Sequence[Any], typ: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(typ):
        # ISO strings with an offset go through Arrow's parser; others take the slow path
        return pa.array(vals, pa.string()).cast(typ)
    if pa.types.is_list(typ) and not all(type(v) is list for v in vals if v is not None):
        raise TypeError("a list column holds scalars")  # Arrow would split strings into chars
    return pa.array(vals, typ)


def _score_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"value": float(v), "passed": v}
    if isinstance(v, (int, float)):
        return {"value": float(v)}
    if isinstance(v, str):
        try:
            return {"value": float(v)}
        except ValueError:
            return {"label": v}
    raise BadValue(f"expected a score (number, boolean or label), got {type(v).__name__}")


def _scores_from_list(items: Any, rid: str) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise BadValue("the scores list is not a list")
    rows = []
    for item in items:
        if not isinstance(item, Mapping) or "name" not in item:
            raise BadValue("each imported score needs a 'name'")
        value = item.get("value")
        # a categorical score's text: Langfuse's stringValue, or a label
        label = item.get("label", item.get("stringValue"))
        if value is None and label is None:
            raise BadValue(f"imported score '{item['name']}' has neither a value nor a label")
        row = {"record_id": rid, "judge": str(item["name"]),
               **(_score_value(value) if value is not None else {})}
        comment = item.get("comment", item.get("explanation"))
        if comment is not None:
            row["explanation"] = str(comment)
        if label is not None:
            row["label"] = str(label)
        rows.append(row)
    return rows


Plan = tuple[tuple[str, frozenset[str]], ...]


def _typed_plan(paths: Iterable[list[str | int]]) -> Plan | None:
    """What typed decoding reads for a mapping: each top-level key with the keys read under
    it (empty: the whole value), or ``None`` when a path has a list index, more than two
    keys, or reads a key both whole and under it."""
    plan: dict[str, set[str]] = {}
    whole: set[str] = set()
    for parts in paths:
        if len(parts) > 2 or not all(type(p) is str for p in parts):
            return None
        head = str(parts[0])
        if len(parts) == 1:
            whole.add(head)
        plan.setdefault(head, set()).update(str(p) for p in parts[1:])
    if any(plan[h] for h in whole):
        return None
    return tuple((h, frozenset(keys)) for h, keys in plan.items())


class _Typed:
    """A msgspec decoder of rows into structs for a :func:`_typed_plan` and the extra keys of a
    chunk's first line. Field names are the JSON keys (attributes are ``f0``, ``f1``... since
    keys need not be identifiers). Absent mapped values decode as ``None`` (the same as
    null); the extra key decodes as ``UNSET`` when absent, since its null is kept. A head in
    ``texts`` (a text column whose value is a list or an object, such as a chat's messages)
    decodes as :class:`msgspec.Raw`, its bytes in the chunk, made into JSON text by
    :func:`json_texts`."""

    def __init__(self, plan: Plan, extras: frozenset[str], forbid_unknown: bool,
                 texts: frozenset[str]) -> None:
        fields: list[tuple[str, Any, Any]] = []
        self.attrs: dict[str, tuple[str, dict[str, str]]] = {}
        for i, (head, keys) in enumerate([*plan, *((e, frozenset()) for e in extras)]):
            typ: Any = msgspec.Raw if head in texts else Any
            inner: dict[str, str] = {}
            if keys:
                inner = {k: f"f{j}" for j, k in enumerate(sorted(keys))}
                typ = msgspec.defstruct(f"Nested{i}", [
                    (a, Any, msgspec.field(default=None, name=k)) for k, a in inner.items()
                ], gc=False) | None
            default = msgspec.UNSET if head in extras else None
            fields.append((f"f{i}", typ, msgspec.field(default=default, name=head)))
            self.attrs[head] = (f"f{i}", inner)
        # gc=False: the structs are not tracked by the cyclic collector (they hold no cycles),
        # so creating and freeing 50,000 of them costs less
        row = msgspec.defstruct("Row", fields, forbid_unknown_fields=forbid_unknown, gc=False)
        self.decoder = msgspec.json.Decoder(row)
        self.extras = extras

    def present(self, rows: list[Any], tops: dict[str, Sequence[Any]]) -> set[str]:
        """The keys some row has (for a mapped key: with a value). The first row decides most
        heads; ``count`` then runs only over a head the first row lacks, at C speed (and in
        the few instructions an identity costs when no row has it, the usual case then)."""
        n, present = len(rows), set()
        for head in self.attrs:
            vals = self.values(rows, head, [], tops)
            none = msgspec.UNSET if head in self.extras else None
            if vals[0] is not none or vals.count(none) < n:
                present.add(head)
        return present

    def values(self, rows: list[Any], head: str, rest: list[str | int],
               tops: dict[str, Sequence[Any]]) -> Sequence[Any]:
        """The value at ``head`` (then ``rest``, one key at most) in every row."""
        if head not in tops:
            # every head at once: each struct as a tuple (its fields in order, in C), the
            # tuples transposed by zip; one attrgetter pass per head cost 2.5 times more
            # (a head already there stays: the text columns json_texts made)
            columns = zip(*map(astuple, rows), strict=True)
            tops.update((h, v) for h, v in zip(self.attrs, columns, strict=True)
                        if h not in tops)
        if not rest:
            return tops[head]
        get = attrgetter(self.attrs[head][1][str(rest[0])])
        try:  # every row has the nested object (the usual case)
            return list(map(get, tops[head]))
        except AttributeError:  # some row has null or lacks the key
            return [v if v is None else get(v) for v in tops[head]]


@lru_cache(maxsize=64)
def _typed(plan: Plan, extras: frozenset[str], forbid_unknown: bool,
           texts: frozenset[str]) -> _Typed:
    """One decoder per mapping and row shape, shared by every chunk that has them (a builder
    lives for one chunk)."""
    return _Typed(plan, extras, forbid_unknown, texts)


def json_texts(raws: Iterable[msgspec.Raw | None]) -> list[str | None]:
    """Each raw JSON value as its text cell: the string itself, or the compact JSON text of
    anything else (what :func:`RecordBuilder._column` makes of a parsed value); ``None`` for
    null or absent. Each value is parsed and written back at once, so its objects are freed
    before the next one is made: a piece's messages never pile up as Python objects (half a
    row's memory). Raises ``orjson.JSONDecodeError``
    where orjson cannot read a value (a number out of range), ``orjson.JSONEncodeError``
    where it cannot write one back."""
    loads, dumps = orjson.loads, orjson.dumps
    out: list[str | None] = []
    append = out.append
    for raw in raws:
        v = None if raw is None else loads(memoryview(raw))
        append(v if v is None or type(v) is str else dumps(v).decode())
    return out


class TypedMismatch(Exception):
    """Typed rows hold a value orjson reads otherwise (an integer beyond 64 bits, which
    msgspec keeps whole and orjson reads as a float or refuses): the caller maps the lines
    again one by one, so every path gives what the plain reader gives."""


def _as_orjson_reads(values: Iterable[Any]) -> None:
    """Raise :class:`TypedMismatch` when ``values`` hold an integer outside orjson's range
    (a signed 64-bit minimum to an unsigned 64-bit maximum), at any depth. Only values that
    missed Arrow's fast conversion are walked."""
    todo = list(values)
    while todo:
        v = todo.pop()
        t = type(v)
        if t is int and not -(1 << 63) <= v < 1 << 64:
            raise TypedMismatch
        if t is list:
            todo.extend(v)
        elif t is dict:
            todo.extend(v.values())
        elif isinstance(v, msgspec.Struct):
            todo.extend(astuple(v))


class _Lines(Sequence[Where]):
    """Where each row of a chunk decoded at once came from: lines ``first``, ``first + 1``...
    of ``ref``, made on demand (a reject, a duplicate) rather than one tuple per row."""

    def __init__(self, ref: FileRef, first: int, n: int) -> None:
        self.ref, self.lines = ref, range(first, first + n)

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(zip(repeat(self.ref), self.lines[i]))
        return self.ref, self.lines[i]

    def __iter__(self) -> Iterator[Where]:
        return zip(repeat(self.ref), self.lines)


class SeenIds:
    """The record ids met so far, and where each was first met. A read with no id twice (the
    usual one) needs only the set: each batch's ids and locations wait in a list (references
    to the strings the set holds, and a location sequence such as :class:`_Lines`) until a
    duplicate needs :meth:`first_met`. The set may hold ids a caller then did not keep (a
    batch that was not all new); :meth:`first_met` is what says where an id was kept."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self._pending: list[tuple[list[str], Iterable[Where]]] = []
        self._first: dict[str, Where] = {}

    def add_new(self, ids: list[str], wheres: Iterable[Where]) -> bool:
        """Add ``ids`` to the set in one pass and say whether they were all new and distinct;
        if so, they are kept, met at ``wheres``. If not, the caller looks the others up in
        :meth:`first_met` and keeps the new ones (:meth:`record`, :meth:`add`)."""
        before = len(self.ids)
        self.ids.update(ids)
        if len(self.ids) - before < len(ids):
            return False
        self._pending.append((ids, wheres))
        return True

    def record(self, ids: list[str], wheres: Iterable[Where]) -> None:
        """Keep ``ids`` (new, already in the set), met at ``wheres``."""
        self._pending.append((ids, wheres))

    def add(self, rid: str, where: Where) -> None:
        """Keep one new id, met at ``where``."""
        self.ids.add(rid)
        self.first_met()[rid] = where

    def first_met(self) -> dict[str, Where]:
        """id -> where it was first met, for every id kept so far."""
        for ids, wheres in self._pending:
            self._first.update(zip(ids, wheres, strict=True))
        self._pending = []
        return self._first


class RecordBuilder:
    """Collects parsed rows and turns them into record tables, rejecting what cannot become a
    record (with its location) and importing the scores the rows carry."""

    def __init__(self, source: str, fields: Mapping[str, Any],
                 required: list[str], record_id: str | None, scores: Mapping[str, str],
                 scores_list: str | None, extra_to_metadata: bool,
                 chat_messages: str = "text") -> None:
        # a column's path(s), or an object with its transforms (sources/_transforms.py)
        try:
            specs = {c: field_spec(c, v) for c, v in fields.items()}
        except ValueError as exc:
            raise ConfigError(f"source.{exc}") from None
        self.transforms = {c: s for c, s in specs.items() if s.transforms}
        fields = {c: list(s.paths) for c, s in specs.items()}
        for key, col in [("fields", c) for c in fields] + [("required", c) for c in required]:
            if col not in MAPPABLE:
                raise ConfigError(f"source.{key}: '{col}' is not a record column; record "
                                  f"columns: {', '.join(MAPPABLE)}")
        self.source = source
        # what the rows gave besides records, in input order, until the caller takes them
        self.rejects: list[Reject] = []
        self.imported: list[ImportedScores] = []
        paths: dict[str, list[str]] = {c: [c] for c in MAPPABLE
                                        if c not in ("record_id", "source")}
        paths.update({c: [p] if isinstance(p, str) else list(p) for c, p in fields.items()})
        if record_id is not None:
            paths["record_id"] = [record_id]
        # column -> its path, or its fallback paths as 'a | b' (for messages)
        self.mapping = {c: " | ".join(ps) for c, ps in paths.items()}
        self.parts = {c: parts_of(ps[0]) for c, ps in paths.items()}
        # column -> every path it reads, in order: the first non-null value of a row wins
        self.fallbacks = {c: [parts_of(p) for p in ps] for c, ps in paths.items()}
        every_path = [parts for ps in self.fallbacks.values() for parts in ps]
        self.required = list(required)
        self.scores = [(name, getter(path)) for name, path in scores.items()]
        self.scores_list = getter(scores_list) if scores_list else None
        # top-level keys that the mapping consumes; the others become metadata
        consumed = {str(parts[0]) for parts in every_path}
        # a row's key with dots in it that a whole path names (a CSV header `meta.model`)
        consumed.update(".".join(map(str, parts)) for parts in every_path if len(parts) > 1)
        consumed.update(p.split(".")[0] for p in scores.values())
        if scores_list:
            consumed.add(scores_list.split(".")[0])
        self.consumed = frozenset(consumed)
        self.extra_to_metadata = extra_to_metadata and "metadata" not in fields
        # text: an input or output mapped in fields to a message list becomes the text a judge
        # reads (the last user message, the assistant's text), the list kept in metadata
        # (sources/_chat); a column read by its own name keeps its value, which the
        # deterministic judges (prompt_echo, tool_success_mismatch) read as the list
        self.chat_columns = frozenset(c for c in ("input", "output") if c in fields) \
            if chat_messages == "text" else frozenset()
        self.seen = SeenIds()  # the ids of the rows kept so far
        self.kept: Sequence[Where] = []
        self.plan = None if scores or scores_list else _typed_plan(every_path)
        # the heads read whole into text columns only: add_typed decodes those whose value
        # is a list or an object as raw JSON (json_texts)
        read = [(col, parts) for col, ps in self.fallbacks.items() for parts in ps]
        text = {parts[0] for col, parts in read
                if len(parts) == 1 and pa.types.is_string(RECORDS.field(col).type)}
        self.text_heads = text - {parts[0] for col, parts in read
                                  if len(parts) > 1 or
                                  not pa.types.is_string(RECORDS.field(col).type)}
        self.reset()

    def fresh(self) -> RecordBuilder:
        """A builder of the same mapping with nothing gathered: a copy sharing what the
        mapping decided (read only after ``__init__``), its own rows, ids and rejects."""
        new = copy.copy(self)
        new.rejects, new.imported, new.seen, new.kept = [], [], SeenIds(), []
        new.reset()
        return new

    def reset(self) -> None:
        self.rows: list[Any] = []  # parsed dicts, or the structs of add_typed
        self.wheres: list[Where] | _Lines = []
        self.typed: _Typed | None = None
        self.data = b""  # the chunk that add_typed decoded, and its lines once split
        self.lines: list[bytes] | None = None
        self.text_columns: dict[str, Sequence[Any]] = {}  # add_typed's, by json_texts

    def __len__(self) -> int:
        return len(self.rows)

    def reject(self, where: str, reason: str, raw: Any = None) -> None:
        """Input at ``where`` (``path:line``) that cannot become a record."""
        self.rejects.append(Reject(where, reason, raw))

    def taken(self) -> list[Reject | ImportedScores]:
        """The rejects and imported scores gathered so far, which the builder forgets."""
        items: list[Reject | ImportedScores] = [*self.rejects, *self.imported]
        self.rejects, self.imported = [], []
        return items

    def add(self, obj: Any, where: Where) -> None:
        """One parsed input row and where it came from (file, line)."""
        if not isinstance(obj, dict):
            self.reject(location(where), json_array(obj, where[0][0]) or
                        f"expected a JSON object, got {type(obj).__name__}", json_text(obj))
            return
        self.rows.append(obj)
        self.wheres.append(where)

    def add_typed(self, data: bytes, lines: int, ref: FileRef, first: int) -> bool:
        """Decode the ``lines`` JSON lines in ``data`` (from line ``first`` of ``ref``) at once
        into typed rows, when they all have the first line's shape, and say whether it did.
        The caller parses line by line when not: that path finds and rejects odd lines.

        msgspec decodes each line straight into a struct of the keys the mapping reads, in C,
        without a dict per row; ``key.key`` heads become nested structs (an object or null).
        The values are the ones orjson gives (integers beyond 64 bits aside: orjson reads them
        as floats), so the columns, rejects and metadata are the same either way. A line that
        is blank, not an object, has a key the first line lacks, or a nested head that is not
        an object makes the whole chunk go line by line."""
        if self.plan is None or self.rows:
            return False
        end = data.find(b"\n")
        try:
            head = orjson.loads(data[:end] if end >= 0 else data)
        except orjson.JSONDecodeError:
            return False
        if type(head) is not dict or any("." in k for k in head):
            return False  # (a key with dots in it is found by the general walk only)
        extras = frozenset(head) - self.consumed if self.extra_to_metadata else frozenset()
        if len(extras) > 1:  # metadata keeps each row's own key order, which structs lose
            return False
        texts = frozenset(h for h in self.text_heads if type(head.get(h)) in (list, dict))
        # first a struct of the mapped keys the first line has (a key that no row has, as
        # most of the record columns a file does not fill, costs each row a field to fill,
        # copy and free: a tenth of the decoding); unknown keys are refused, so a later line
        # with another mapped key sends the chunk to the struct of every mapped key (and so
        # would any line of a file whose unmapped keys are dropped, not kept: not tried then)
        narrow = tuple((h, keys) for h, keys in self.plan if h in head)
        plans = [(narrow, True)] if len(narrow) < len(self.plan) and \
            (self.extra_to_metadata or not frozenset(head) - self.consumed) else []
        for plan, forbid in [*plans, (self.plan, self.extra_to_metadata)]:
            try:
                typed = _typed(plan, extras, forbid, texts)
            except ValueError:  # msgspec takes no field name with '"', '\\' or control chars
                return False
            try:
                rows = typed.decoder.decode_lines(data)
                break
            except msgspec.ValidationError:
                if plan is narrow:
                    continue
                return False
            except (msgspec.DecodeError, UnicodeDecodeError):
                return False  # (msgspec raises the last for a string that is not UTF-8)
        if len(rows) != lines:
            return False  # a blank line was skipped: line numbers would shift
        try:
            self.text_columns = {h: json_texts(map(attrgetter(typed.attrs[h][0]), rows))
                                 for h in texts}
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            return False  # the line-by-line path rejects or writes what orjson cannot
        self.rows, self.typed, self.data = rows, typed, data
        self.wheres = _Lines(ref, first, len(rows))
        return True

    def _raw(self, i: int) -> str:
        """Row ``i`` as JSON text, for its reject."""
        if self.typed is None:
            return json_text(self.rows[i])
        if self.lines is None:  # split once per chunk, however many rows it rejects
            self.lines = self.data.split(b"\n")
        return json_text(orjson.loads(self.lines[i]))

    def flush(self) -> pa.Table | None:
        """The rows gathered so far as one record table (``None`` if none survived)."""
        rows = self.rows
        if not rows:
            return None
        n = len(rows)
        bad: dict[int, str] = {}
        arrays: dict[str, pa.Array] = {}
        # top-level key -> its value in every row (the text columns made already)
        tops = self.text_columns
        ids: list[Any] | None = None
        chats: dict[str, dict[int, list[Any]]] = {}  # side -> row -> its message list
        present = self.typed.present(rows, tops) if self.typed else \
            set().union(*map(dict.keys, rows))
        for col in self.parts:
            found = [p for p in self.fallbacks[col] if p[0] in present or _dotted(p, present)]
            spec = self.transforms.get(col)
            if not found and spec is not None and spec.default is not None:
                arrays[col] = self._column(col, self._transformed(col, [None] * n, bad), bad)
                continue
            if not found:
                if col == "metadata" and self.extra_to_metadata and present - self.consumed:
                    text = self._extra_text(present, tops)
                    if text is None:
                        vals = self._with_extras([None] * n, present, tops)
                        text = self._column(col, vals, bad)
                    arrays[col] = text
                continue
            vals = self._at(found[0], tops, present)
            for more in found[1:]:  # fallbacks: a row's first non-null value wins
                if None not in vals:
                    break
                vals = [v if v is not None else m
                        for v, m in zip(vals, self._at(more, tops, present), strict=True)]
            if spec is not None:
                vals = self._transformed(col, vals, bad)
            if col in self.chat_columns:
                vals, lists = chat_column(col, vals)
                if lists:
                    chats[col] = lists
            if col == "record_id":
                if self.typed is not None:
                    _as_orjson_reads([v for v in vals if type(v) is not str])
                # an empty or blank id is no id: missing, not one record named ""
                vals = ids = [None if v is None else (v if v and not v.isspace() else None)
                              if type(v) is str else json_text(v) for v in vals]
            elif col == "metadata" and self.extra_to_metadata:
                vals = self._with_extras(vals, present, tops)
            arrays[col] = self._column(col, vals, bad)
        if "record_id" not in self.mapping:
            # default id: file name and line, stable while the file is unchanged
            arrays["record_id"] = pa.array([f"{w[0][1]}:{w[1]}" for w in self.wheres],
                                           pa.string())
        elif "record_id" not in arrays:
            arrays["record_id"] = pa.nulls(n, pa.string())
        if chats:
            meta = arrays["metadata"].to_pylist() if "metadata" in arrays else [None] * n
            arrays["metadata"] = pa.array(with_messages(meta, chats), pa.string())
        for col in self.required:
            if col not in arrays:
                arrays[col] = pa.nulls(n, RECORDS.field(col).type)
        if ids is None:  # (else the record_id column's values, as Python strings)
            ids = arrays["record_id"].to_pylist()
        for col in self.required:
            for i in arrays[col].is_null().to_numpy(zero_copy_only=False).nonzero()[0]:
                bad.setdefault(int(i), f"required field '{col}' is missing (mapped from "
                               f"'{self.mapping[col]}')")
        imported: list[dict[str, Any]] = []
        if self._clean_ids(ids, bad):
            ids = []  # every id is new and present: recorded, nothing to check row by row
        first_met = self.seen.first_met() if ids else {}
        for i, rid in enumerate(ids):
            if i in bad:
                continue
            if rid is None:
                bad[i] = f"record id is missing (mapped from '{self.mapping['record_id']}')"
                continue
            first = first_met.get(rid)
            if first is not None:
                bad[i] = duplicate_id(rid, location(first))
                continue
            if self.scores or self.scores_list:
                try:
                    imported.extend(self._scores(rows[i], rid))
                except BadValue as exc:
                    bad[i] = f"imported score: {exc}"
                    continue
            self.seen.add(rid, self.wheres[i])
        arrays["source"] = pa.repeat(pa.scalar(self.source), n)
        table = pa.table(arrays)
        if bad:
            for i, reason in sorted(bad.items()):
                self.reject(location(self.wheres[i]), reason, self._raw(i))
            table = table.filter(pa.array([i not in bad for i in range(n)]))
        if imported:
            scores = ImportedScores.of(imported)
            if scores.table.num_rows:
                self.imported.append(scores)
        # where each row of the table came from, for a caller that checks ids across builders
        self.kept = [w for i, w in enumerate(self.wheres) if i not in bad] if bad else \
            self.wheres
        self.reset()
        return table if table.num_rows else None

    def _transformed(self, col: str, vals: Sequence[Any], bad: dict[int, str]) -> list[Any]:
        """``vals`` through ``col``'s declared transforms (a value that cannot be scaled
        rejects its row)."""
        out, failed = self.transforms[col].apply(vals)
        for i, reason in failed.items():
            bad.setdefault(i, f"field '{col}' (from '{self.mapping[col]}'): {reason}")
        return out

    def _clean_ids(self, ids: list[Any], bad: dict[int, str]) -> bool:
        """When no row is bad yet, no score is imported and the batch's ids are present,
        distinct and new, record them all at once (C-level set operations) and say so."""
        if bad or self.scores or self.scores_list or None in ids:
            return False
        return self.seen.add_new(ids, self.wheres)

    def _at(self, parts: list[str | int], tops: dict[str, Sequence[Any]],
            present: set[str]) -> Sequence[Any]:
        """The value at ``parts`` in every row; a path whose first step no row has names a
        key with dots in it (a CSV header ``meta.model``), which the general walk finds."""
        if parts[0] in present or self.typed is not None:
            return self._values(parts, tops)
        return [walk(row, parts) for row in self.rows]

    def _values(self, parts: list[str | int], tops: dict[str, Sequence[Any]]) -> Sequence[Any]:
        """The value at path ``parts`` in every row. Each top-level key is read once per batch
        with a C-level ``map`` (it serves several columns: ``usage.input``, ``usage.output``),
        and the rest of the path is walked from there (a plain key straight off a dict)."""
        head, rest = parts[0], parts[1:]
        if type(head) is not str:  # a list index into a row, which is an object
            return [None] * len(self.rows)
        if self.typed is not None:
            return self.typed.values(self.rows, head, rest, tops)
        if head not in tops:
            tops[head] = list(map(dict.get, self.rows, repeat(head)))
        top = tops[head]
        if not rest:
            return top
        if len(rest) == 1 and type(rest[0]) is str:
            key = rest[0]
            return [v.get(key) if type(v) is dict else walk(v, rest) for v in top]
        return [walk(v, rest) for v in top]

    def _with_extras(self, vals: Sequence[Any], present: set[str],
                     tops: dict[str, Sequence[Any]]) -> Sequence[Any]:
        """``vals``, with each missing value replaced by the row's unmapped keys (in the row's
        order), when it has any."""
        extra = present - self.consumed
        if not extra:
            return vals
        if self.typed is not None:  # one extra key (add_typed): UNSET where a row lacks it
            (key,) = extra
            unset = msgspec.UNSET
            return [v if v is not None or e is unset else {key: e}
                    for v, e in zip(vals, self.typed.values(self.rows, key, [], tops),
                                    strict=True)]
        if len(extra) == 1:  # the usual shape: one key the mapping does not consume
            (key,) = extra
            return [v if v is not None or key not in o else {key: o[key]}
                    for v, o in zip(vals, self.rows, strict=True)]
        out = []
        for v, o in zip(vals, self.rows, strict=True):
            if v is None and not extra.isdisjoint(o):
                v = {k: o[k] for k in o if k in extra}
            out.append(v)
        return out

    def _extra_text(self, present: set[str],
                    tops: dict[str, Sequence[Any]]) -> pa.Array | None:
        """The metadata column of typed rows whose one extra key holds a string (or is
        absent: no metadata) in every row, when no row has a metadata value: the text
        ``{"key":"value"}`` joined by Arrow (a dict per row dumped by orjson cost three times
        more). ``None`` when a value is not a string (a JSON null too: ``{"key":null}``) or
        needs escaping in JSON: the general path does those."""
        if self.typed is None:
            return None
        (key,) = present - self.consumed  # (typed rows have one extra key at most)
        extra = self.typed.values(self.rows, key, [], tops)
        if None in extra:  # a JSON null, which is kept: {"key":null}
            return None
        unset = msgspec.UNSET
        vals = [None if v is unset else v for v in extra]
        try:
            text = pa.array(vals, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return None  # a number, an object, a list...
        # orjson writes a string as is, between quotes, unless it has one of these
        if pc.any(pc.match_substring_regex(text, r'["\\\x00-\x1f]')).as_py():
            return None
        head = "{" + orjson.dumps(key).decode() + ':"'
        return pc.binary_join_element_wise(head, text, '"}', "")

    def _column(self, col: str, vals: Sequence[Any], bad: dict[int, str]) -> pa.Array:
        typ = RECORDS.field(col).type
        try:
            return _fast_array(vals, typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
        if self.typed is not None:
            _as_orjson_reads(vals)
        if pa.types.is_string(typ):  # text beside JSON values (message lists, objects)
            dumps = orjson.dumps
            try:  # parsed JSON needs none of json_text's options, which cost a third more
                return pa.array([v if v is None or type(v) is str else dumps(v).decode()
                                 for v in vals], typ)
            except orjson.JSONEncodeError:
                return pa.array([json_text(v) for v in vals], typ)
        coerce = coercer(typ)
        out = []
        for i, v in enumerate(vals):
            if v is None or (type(v) is str and not v.strip()):
                # "" is no value, as an empty CSV cell is: JSON logs write it where nothing
                # was measured, and a reject would drop the record (a failed call's)
                out.append(None)
                continue
            try:
                out.append(coerce(v))
            except BadValue as exc:
                bad.setdefault(i, f"field '{col}' (from '{self.mapping[col]}'): {exc}")
                out.append(None)
        return pa.array(out, typ)

    def _scores(self, obj: dict[str, Any], rid: str) -> list[dict[str, Any]]:
        out = []
        for name, get in self.scores:
            v = get(obj)
            if v is not None:
                out.append({"record_id": rid, "judge": name, **_score_value(v)})
        if self.scores_list is not None:
            items = self.scores_list(obj)
            if items is not None:
                out.extend(_scores_from_list(items, rid))
        return out


def _dotted(parts: list[str | int], present: set[str]) -> bool:
    """Whether a key with dots in it (a CSV header ``meta.model``) that ``parts`` names, whole
    or as its first steps, is among the rows' keys."""
    return len(parts) > 1 and any(".".join(map(str, parts[:j])) in present
                                  for j in range(2, len(parts) + 1))


def batches(builder: RecordBuilder, rows: Iterator[tuple[Any, Where]],
            batch_size: int) -> Iterator[pa.Table | Reject | ImportedScores]:
    """Feed ``(row, where)`` items to ``builder``; yield a table every ``batch_size`` rows and
    at the end, each after the rejects and imported scores gathered until then.

    The cyclic garbage collector is paused while a batch is parsed: the parsed rows hold no
    cycles, and with tens of thousands of live dicts its passes cost more than the parsing."""
    while True:
        with gc_paused():
            done = True
            add = builder.add
            for obj, where in rows:
                add(obj, where)
                if len(builder.rows) >= batch_size:
                    done = False
                    break
            table = builder.flush()
        yield from builder.taken()
        if table is not None:
            yield table
        if done:
            return
