"""From parsed input rows (dicts) to record batches: field mapping, type checks, rejects,
duplicate ids and imported scores. Shared by the file sources.

The hot path is columnar: values are gathered per column and converted by Arrow in one call;
only a column whose fast conversion fails is walked row by row to find, coerce or reject the
offending values."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.context import RunContext
from evalkit.errors import ConfigError
from evalkit.results.schemas import RECORDS

# columns a source may fill (the rest belong to the runner and the filters)
MAPPABLE = [f.name for f in RECORDS if f.name not in ("run_id", "excluded_by", "exclude_reason")]

Getter = Callable[[Any], Any]
_MISSING = object()


def getter(path: str) -> Getter:
    """A function reading dotted ``path`` (``output.completion``, ``messages.0.content``)
    from nested dicts and lists; returns ``_MISSING`` when any step is absent. A step into a
    string holding JSON parses it (fields logged as JSON text)."""
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    if len(parts) == 1:
        key = parts[0]
        return lambda obj: obj.get(key, _MISSING) if isinstance(obj, Mapping) else _MISSING

    def get(obj: Any) -> Any:
        for part in parts:
            if isinstance(obj, str) and obj[:1] in "{[":
                try:
                    obj = json.loads(obj)
                except ValueError:
                    return _MISSING
            if isinstance(part, int):
                if not isinstance(obj, list) or part >= len(obj):
                    return _MISSING
                obj = obj[part]
            elif isinstance(obj, Mapping):
                if part not in obj:
                    return _MISSING
                obj = obj[part]
            else:
                return _MISSING
        return obj

    return get


class BadValue(ValueError):
    """A value that cannot be coerced to its column's type."""


def _to_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, default=str)


def _to_float(v: Any) -> float:
    if isinstance(v, bool):
        raise BadValue(f"expected a number, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            raise BadValue(f"expected a number, got {v[:40]!r}") from None
    raise BadValue(f"expected a number, got {type(v).__name__}")


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        raise BadValue(f"expected an integer, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            raise BadValue(f"expected an integer, got {v[:40]!r}") from None
    raise BadValue(f"expected an integer, got {v!r}")


def _to_list(v: Any) -> list[str]:
    if isinstance(v, str):
        if v.startswith("["):
            try:
                v = json.loads(v)
            except ValueError:
                return [v]
        else:
            return [v]
    if isinstance(v, list):
        return [x if isinstance(x, str) else _to_text(x) for x in v if x is not None]
    raise BadValue(f"expected a list of strings, got {type(v).__name__}")


def _to_timestamp(v: Any) -> datetime:
    if isinstance(v, bool):
        raise BadValue(f"expected a timestamp, got {v!r}")
    if isinstance(v, (int, float)):
        # seconds, or milliseconds when the number is too large to be seconds
        return datetime.fromtimestamp(v / 1000 if v > 1e11 else v, tz=timezone.utc)
    if isinstance(v, str):
        try:
            ts = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise BadValue(f"expected an ISO-8601 timestamp, got {v[:40]!r}") from None
        return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    raise BadValue(f"expected a timestamp, got {type(v).__name__}")


def _coercer(typ: pa.DataType) -> Callable[[Any], Any]:
    if pa.types.is_string(typ):
        return _to_text
    if pa.types.is_floating(typ):
        return _to_float
    if pa.types.is_integer(typ):
        return _to_int
    if pa.types.is_list(typ):
        return _to_list
    if pa.types.is_timestamp(typ):
        return _to_timestamp
    raise TypeError(typ)  # pragma: no cover - every RECORDS type is listed


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


class RecordBuilder:
    """Collects rows into record batches, rejecting what cannot become a record."""

    def __init__(self, source: str, ctx: RunContext, fields: Mapping[str, str],
                 required: list[str], record_id: str | None, scores: Mapping[str, str],
                 scores_list: str | None, extra_to_metadata: bool,
                 known_keys: list[str] | None = None) -> None:
        for col in list(fields) + list(required):
            if col not in MAPPABLE:
                raise ConfigError(f"source: '{col}' is not a record column; record columns: "
                                  f"{', '.join(MAPPABLE)}")
        self.source = source
        self.ctx = ctx
        mapping = {c: c for c in MAPPABLE if c not in ("record_id", "source")}
        mapping.update(fields)
        if record_id is not None:
            mapping["record_id"] = record_id
        self.mapping = mapping
        self.columns = list(mapping)
        self.getters = [getter(mapping[c]) for c in self.columns]
        self.required = [(c, self.columns.index(c)) for c in required]
        self.has_id = "record_id" in mapping
        self.id_index = self.columns.index("record_id") if self.has_id else -1
        self.scores = [(name, getter(path)) for name, path in scores.items()]
        self.scores_list = getter(scores_list) if scores_list else None
        # top-level keys that the mapping consumes; others become metadata
        consumed = {mapping[c].split(".")[0] for c in self.columns}
        consumed.update(p.split(".")[0] for p in scores.values())
        if scores_list:
            consumed.add(scores_list.split(".")[0])
        self.consumed = consumed
        self.extra_to_metadata = extra_to_metadata and "metadata" not in fields
        self.meta_index = self.columns.index("metadata")
        self.seen_ids: dict[str, str] = {}
        self._reset()

    def _reset(self) -> None:
        self.values: list[list[Any]] = [[] for _ in self.columns]
        self.locations: list[str] = []
        self.raws: list[Any] = []
        self.imported: list[dict[str, Any]] = []
        self._default_ids: list[str] = []

    def __len__(self) -> int:
        return len(self.locations)

    def add(self, obj: Any, location: str, default_id: str) -> None:
        """One parsed input row; ``location`` (file:line) names it in rejects."""
        if not isinstance(obj, Mapping):
            self.ctx.reject(self.source, location,
                            f"expected a JSON object, got {type(obj).__name__}", _raw(obj))
            return
        row = [g(obj) for g in self.getters]
        for col, i in self.required:
            if row[i] is _MISSING or row[i] is None or row[i] == "":
                self.ctx.reject(self.source, location, f"required field '{col}' is missing "
                                f"(mapped from '{self._path(col)}')", _raw(obj))
                return
        if self.has_id:
            rid = row[self.id_index]
            if rid is _MISSING or rid is None:
                self.ctx.reject(self.source, location, "record id is missing (mapped from "
                                f"'{self._path('record_id')}')", _raw(obj))
                return
            rid = str(rid)
        else:
            rid = default_id
        first = self.seen_ids.get(rid)
        if first is not None:
            self.ctx.reject(self.source, location,
                            f"duplicate record id '{rid}' (first seen at {first})", _raw(obj))
            return
        self.seen_ids[rid] = location
        if self.has_id:
            row[self.id_index] = rid
        if self.extra_to_metadata and row[self.meta_index] is _MISSING:
            extra = {k: v for k, v in obj.items() if k not in self.consumed}
            if extra:
                row[self.meta_index] = extra
        try:
            self._collect_scores(obj, rid)
        except BadValue as exc:
            self.ctx.reject(self.source, location, f"imported score: {exc}", _raw(obj))
            del self.seen_ids[rid]
            return
        for vals, v in zip(self.values, row):
            vals.append(None if v is _MISSING else v)
        self.locations.append(location)
        self.raws.append(obj)
        if not self.has_id:
            self._default_ids.append(rid)

    def _path(self, col: str) -> str:
        return self.mapping[col]

    def _collect_scores(self, obj: Any, rid: str) -> None:
        for name, get in self.scores:
            v = get(obj)
            if v is not _MISSING and v is not None:
                self.imported.append({"record_id": rid, "judge": name, **_score_value(v)})
        if self.scores_list is not None:
            items = self.scores_list(obj)
            if items is _MISSING or items is None:
                return
            if not isinstance(items, list):
                raise BadValue("the scores list is not a list")
            for item in items:
                if not isinstance(item, Mapping) or "name" not in item:
                    raise BadValue("each imported score needs a 'name'")
                row = {"record_id": rid, "judge": str(item["name"]),
                       **_score_value(item.get("value"))}
                for key in ("comment", "explanation"):
                    if item.get(key) is not None:
                        row["explanation"] = str(item[key])
                if item.get("label") is not None:
                    row["label"] = str(item["label"])
                self.imported.append(row)

    def flush(self) -> pa.Table | None:
        """The rows gathered so far as one record table (``None`` if there are none)."""
        n = len(self.locations)
        if not n:
            return None
        arrays: dict[str, pa.Array] = {}
        bad: dict[int, str] = {}
        for col, vals in zip(self.columns, self.values):
            typ = RECORDS.field(col).type
            try:
                arrays[col] = _fast_array(vals, typ)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                coerce = _coercer(typ)
                out = []
                for i, v in enumerate(vals):
                    if v is None:
                        out.append(None)
                        continue
                    try:
                        out.append(coerce(v))
                    except (BadValue, OverflowError, ValueError, OSError) as exc:
                        bad.setdefault(i, f"field '{col}': {exc}")
                        out.append(None)
                arrays[col] = pa.array(out, typ)
        if not self.has_id:
            arrays["record_id"] = pa.array(self._default_ids, pa.string())
        arrays["source"] = pa.array([self.source] * n, pa.string())
        table = pa.table(arrays)
        if bad:
            for i, reason in sorted(bad.items()):
                self.ctx.reject(self.source, self.locations[i], reason, _raw(self.raws[i]))
            keep = pa.array([i not in bad for i in range(n)])
            table = table.filter(keep)
            bad_ids = {self._id_at(i) for i in bad}
            self.imported = [s for s in self.imported if s["record_id"] not in bad_ids]
        if self.imported:
            self.ctx.import_judgments(self.imported)
        self._reset()
        return table

    def _id_at(self, i: int) -> str:
        return self._default_ids[i] if not self.has_id else str(self.values[self.id_index][i])


def _fast_array(vals: list[Any], typ: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(typ):
        # ISO strings through Arrow's parser; anything else takes the slow path
        arr = pa.array(vals, pa.string())
        return pc.cast(pc.strptime(arr, "%Y-%m-%dT%H:%M:%S%z", "us", error_is_null=False), typ)
    arr = pa.array(vals, typ)
    return arr


def _raw(obj: Any) -> str:
    return obj if isinstance(obj, str) else _to_text(obj)


def batches(builder: RecordBuilder, rows: Iterator[tuple[Any, str, str]],
            batch_size: int) -> Iterator[pa.Table]:
    """Feed ``(row, location, default_id)`` items to ``builder``; yield a table every
    ``batch_size`` rows and at the end."""
    for obj, location, default_id in rows:
        builder.add(obj, location, default_id)
        if len(builder) >= batch_size:
            table = builder.flush()
            if table is not None:
                yield table
    table = builder.flush()
    if table is not None:
        yield table
