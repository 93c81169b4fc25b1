"""``langfuse``: records from a Langfuse project's observations (or traces), and its scores as
imported judgments.

Two API generations are in the field, and the source reads from both:

- ``v3`` (self-hosted Langfuse v3): page-based ``/traces``, ``/observations`` and
  ``/v2/scores`` (``page``, ``limit`` ≤ 100, ``meta.totalItems``); pages are fetched in
  parallel once the first one says how many there are;
- ``v4`` (Langfuse v4 and Cloud): cursor-based ``/v2/observations`` (``limit`` ≤ 1000, field
  groups) and ``/v3/scores``; a cursor is sequential, so the window is cut into ``shards``
  slices read in parallel.

``api: auto`` probes ``/v2/observations`` and falls back to ``v3`` on 404. A 422 (query too
heavy) halves the page size and goes on. Scores that point at observations the bulk list
did not return are resolved by id (batched ``id`` filters on v4, one GET per id on v3); the
ones the server cannot find are rejects.

``source.shard=i/n`` cuts the window into ``n`` half-open slices of whole milliseconds,
computed from the configured bounds alone (:func:`time_slices`), and shard ``i`` lists only
the records of its slice: the shards fetch each record once between them. Scores are listed
by their own time, which says nothing of their record's, so every shard lists the window's
scores and keeps those of its records; a score target no listing of the shard returned is
looked up by the one shard whose slice holds the target's first score, and kept there unless
it starts in another shard's slice whose listing returns it. ``shard_by: record_id`` reads
the whole window and leaves the cut to the runner (a hash of the record id).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pyarrow as pa

from evalkit._fork import can_fork
from evalkit._gc import gc_paused
from evalkit.context import RunContext
from evalkit.errors import ConfigError, SourceError
from evalkit.langfuse_client import (
    LangfuseClient,
    NotFound,
    NotJson,
    TooHeavy,
    parse_body,
    refuse_keys_in_config,
    resolve_host,
)
from evalkit.paths import fallback_getter, path_list
from evalkit.plugin import ImportedScores, Reject, Source, SourceItem
from evalkit.results.schemas import RECORDS, json_text
from evalkit.sources._mapping import MAPPABLE, coercer
from evalkit.sources.langfuse import mapping
from evalkit.sources.langfuse.state import ReadState, last_window_end, spool_name
from evalkit.sources.langfuse.workers import PagePool

__all__ = [
    "APIS", "CURSOR_OBSERVATIONS_LIMIT", "LEVELS", "PAGE_LIMIT", "READS", "SHARD_BY", "TYPES",
    "LangfuseSource", "LangfuseSourceConfig", "time_slices",
]

APIS = ("auto", "v3", "v4")
READS = ("observations", "traces")
SHARD_BY = ("time", "record_id")
TYPES = ("SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
         "EMBEDDING", "GUARDRAIL")
LEVELS = ("DEBUG", "DEFAULT", "WARNING", "ERROR")
PAGE_LIMIT = 100  # page-based endpoints and /v3/scores
CURSOR_OBSERVATIONS_LIMIT = 1000  # /v2/observations
_P = "/api/public"


@dataclass(frozen=True)
class LangfuseSourceConfig:
    host: str | None = None  # Langfuse URL; default $LANGFUSE_HOST
    api: str = "auto"  # auto (probe), v3 (page-based: self-hosted v3), v4 (cursor: v4, Cloud)
    read: str = "observations"  # observations (one record each) or traces (one per trace)
    from_time: str | None = None  # window start, ISO 8601, inclusive; default now - last_days
    to_time: str | None = None  # window end, exclusive; default now - settle_s
    last_days: float = 7.0  # length of the default window
    settle_s: float = 0.0  # leave the newest seconds to the next run (ingestion lag)
    incremental: bool = False  # start where the last successful run of this experiment ended
    # source.shard=i/n: time (shard i lists only its slice of [from_time, to_time); needs
    # to_time) or record_id (each shard reads the window, keeps what hashes to it)
    shard_by: str = "time"
    types: list[str] = field(default_factory=lambda: ["GENERATION"])  # observation types; []: all
    name: str | None = None  # observation (or trace) name
    level: str | None = None  # DEBUG, DEFAULT, WARNING or ERROR
    environment: list[str] = field(default_factory=list)  # any of these environments
    tags: list[str] = field(default_factory=list)  # traces carrying all of these tags
    user_id: str | None = None  # traces of this user
    session_id: str | None = None  # traces of this session (not on v3 observations)
    import_scores: bool = True  # read the window's scores as judgments (origin=imported)
    score_names: list[str] = field(default_factory=list)  # only these score names; []: all
    resolve_score_targets: bool = True  # fetch by id observations scores point at but lists miss
    resolve_retry_s: float = 5.0  # wait this long and look again for ids not found (lag)
    # record column -> path in the object, or a list of paths: the first non-null one wins
    fields: dict[str, Any] = field(default_factory=dict)
    expand_metadata: list[str] = field(default_factory=list)  # v4: metadata keys kept whole
    trace_context: bool = True  # v3: look up each observation's trace (session, user, tags)
    page_size: int | None = None  # items per request; default the endpoint's maximum
    concurrency: int = 8  # requests in flight
    shards: int | None = None  # window slices read in parallel on v4; default concurrency
    timeout_s: float = 60.0  # per request
    max_retries: int = 6  # per request, on 429, 5xx, 524 and network errors
    batch_size: int = 5000  # records per batch handed to the runner
    resume: bool = True  # keep progress under runs/.state and resume an interrupted read
    progress: bool = True  # print progress to stderr
    workers: int | None = None  # processes mapping v4 pages (0: none); default: one per core
    public_key: str | None = None  # never set: keys come from $LANGFUSE_PUBLIC_KEY
    secret_key: str | None = None  # never set: keys come from $LANGFUSE_SECRET_KEY

    def validate(self) -> None:
        refuse_keys_in_config(self.public_key, self.secret_key)
        _one_of("api", self.api, APIS)
        _one_of("read", self.read, READS)
        _one_of("shard_by", self.shard_by, SHARD_BY)
        for t in self.types:
            _one_of("types", t, TYPES)
        if self.level is not None:
            _one_of("level", self.level, LEVELS)
        for key in ("from_time", "to_time"):
            value = getattr(self, key)
            if value is not None:
                try:
                    mapping.parse_time(value)
                except ValueError:
                    raise ValueError(f"{key}: {value!r} is not an ISO-8601 timestamp "
                                     "(e.g. 2026-05-01T00:00:00Z)") from None
        if self.from_time and self.to_time and \
                mapping.parse_time(self.from_time) >= mapping.parse_time(self.to_time):
            raise ValueError("from_time must be before to_time")
        for key in ("concurrency", "batch_size", "page_size", "shards"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ValueError(f"{key}: must be at least 1")
        if self.workers is not None and self.workers < 0:
            raise ValueError("workers: must be 0 (map pages in the reader) or more")
        if self.last_days <= 0:
            raise ValueError("last_days: must be positive")
        for col, paths in self.fields.items():
            if col not in MAPPABLE:
                raise ValueError(f"fields.{col}: not a record column; record columns: "
                                 f"{', '.join(MAPPABLE)}")
            if not (isinstance(paths, str) and paths) and not (
                    isinstance(paths, list) and paths and
                    all(isinstance(p, str) and p for p in paths)):
                raise ValueError(f"fields.{col}: {paths!r} is not a dotted path or a list of "
                                 "them (fallbacks, first non-null wins)")

    def field_paths(self) -> list[str]:
        """Every path the custom ``fields`` read (their fallbacks too)."""
        return [p for paths in self.fields.values() for p in path_list(paths)]


def _one_of(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(allowed)}")


@dataclass
class _Stream:
    """One paginated listing and how far it got."""

    key: str
    kind: str  # records or scores
    path: str
    params: dict[str, Any]
    paged: bool
    limit: int
    cursor: str | None = None
    total_items: int | None = None
    pages_done: list[int] = field(default_factory=list)
    seq: int = 0
    done: bool = False
    failed: str | None = None

    def progress(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items()
                if k in ("cursor", "total_items", "pages_done", "seq", "done")}


class _Stopped(Exception):
    """The consumer went away; the reader stops."""


class LangfuseSource(Source):
    """Reads a Langfuse project's observations or traces in a time window, with its scores."""

    Config = LangfuseSourceConfig

    def __init__(self, name: str, config: LangfuseSourceConfig, ctx: RunContext) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.host: str | None = None
        self.api: str | None = None
        self.window: tuple[datetime, datetime] | None = None
        self.incremental_after: str | None = None
        self.resumed = False
        self.complete = False
        self.stats: dict[str, Any] = {}
        self.shard_spec: tuple[int, int] | None = None  # source.shard=i/n, however cut
        self.time_shard: tuple[int, int] | None = None  # set when this source cuts by time

    def shard(self, index: int, count: int) -> bool:
        """``source.shard=index/count``: by time (the default), this read lists only its slice
        of the window; by record id, the runner cuts what it yields."""
        self.shard_spec = (index, count)
        if self.config.shard_by == "record_id":
            return False
        if self.config.to_time is None:
            raise ConfigError(
                "source.to_time: Langfuse shards (source.shard=i/n) cut a fixed time window, "
                "but without an end each shard takes its own 'now' and the slices would "
                "overlap or miss records; set source.to_time (e.g. "
                "source.to_time=2026-05-08T00:00:00Z), or shard by a hash of the record id "
                "with source.shard_by=record_id")
        self.time_shard = (index, count)
        return True

    def cuts(self) -> list[datetime]:
        """The ``n + 1`` bounds of the time shards' slices (one slice when not time-sharded)."""
        assert self.window is not None
        start, end = self.window
        count = self.time_shard[1] if self.time_shard else 1
        return [time_slices(start, end, k, count)[0] for k in range(count)] + \
            [time_slices(start, end, count - 1, count)[1]]

    def records_window(self) -> tuple[datetime, datetime]:
        """The part of the window whose records this read lists: its slice, when time-sharded."""
        assert self.window is not None
        return self.window if self.time_shard is None else \
            time_slices(*self.window, *self.time_shard)

    # -- identity ---------------------------------------------------------------------------

    def _identity(self) -> str:
        """Host and the filters that select what is read (not the window): an incremental
        read continues after the last run with the same identity."""
        cfg = self.config
        ident = {"host": self.host, "read": cfg.read, "types": sorted(cfg.types),
                 "name": cfg.name, "level": cfg.level, "environment": sorted(cfg.environment),
                 "tags": sorted(cfg.tags), "user_id": cfg.user_id, "session_id": cfg.session_id}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    def _state_key(self) -> str:
        """Everything that shapes the read and its spooled pages: progress is only resumed by
        a read configured the same way."""
        cfg = self.config
        shape = {"identity": self._identity(), "api": cfg.api, "from": cfg.from_time,
                 "to": cfg.to_time, "last_days": cfg.last_days, "settle_s": cfg.settle_s,
                 "incremental": cfg.incremental, "page_size": cfg.page_size,
                 "shards": cfg.shards or cfg.concurrency, "import_scores": cfg.import_scores,
                 "score_names": sorted(cfg.score_names), "fields": sorted(cfg.fields.items()),
                 "expand_metadata": sorted(cfg.expand_metadata),
                 "trace_context": cfg.trace_context}
        if self.shard_spec is not None:  # the shards of one sweep never share progress
            shape["shard"] = [*self.shard_spec, cfg.shard_by]
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]

    def fingerprint(self) -> dict[str, Any]:
        """Host, API generation, window and filters (never keys), and what the read did."""
        cfg = self.config
        return {
            "plugin": "langfuse",
            "host": self.host or cfg.host,
            "api": self.api,
            "read": cfg.read,
            "window": None if self.window is None else
            {"from": mapping.iso(self.window[0]), "to": mapping.iso(self.window[1])},
            "filters": {"types": cfg.types, "name": cfg.name, "level": cfg.level,
                        "environment": cfg.environment, "tags": cfg.tags,
                        "user_id": cfg.user_id, "session_id": cfg.session_id},
            "scores": {"import": cfg.import_scores, "names": cfg.score_names},
            "identity": self._identity() if self.host else None,
            "incremental_after": self.incremental_after,
            "resumed": self.resumed,
            "complete": self.complete,
            "stats": self.stats,
            **({} if self.shard_spec is None else {"shard": self._shard_fingerprint()}),
        }

    def _shard_fingerprint(self) -> dict[str, Any]:
        assert self.shard_spec is not None
        out: dict[str, Any] = {"index": self.shard_spec[0], "count": self.shard_spec[1],
                               "by": self.config.shard_by}
        if self.time_shard is not None and self.window is not None:
            a, b = self.records_window()
            out["window"] = {"from": mapping.iso(a), "to": mapping.iso(b)}
        return out

    # -- the window ---------------------------------------------------------------------------

    def _resolve_window(self) -> tuple[datetime, datetime]:
        cfg = self.config
        now = datetime.now(timezone.utc)
        end = mapping.parse_time(cfg.to_time) if cfg.to_time else \
            now - timedelta(seconds=cfg.settle_s)
        start = mapping.parse_time(cfg.from_time) if cfg.from_time else \
            end - timedelta(days=cfg.last_days)
        if cfg.incremental:
            last = last_window_end(self.ctx.runs_dir, self.ctx.experiment, self._identity())
            if last is not None:
                start = mapping.parse_time(last[0])
                self.incremental_after = last[1]
        assert start is not None and end is not None
        return start, max(start, end)

    # -- reading ------------------------------------------------------------------------------

    def read(self) -> Iterator[SourceItem]:
        """Stream record batches, with the rejects and imported scores as they come."""
        self.host = resolve_host(self.config.host)
        items: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=8)
        stop = threading.Event()

        def put(item: tuple[str, Any]) -> None:
            while True:
                if stop.is_set():
                    raise _Stopped
                try:
                    items.put(item, timeout=0.2)
                    return
                except queue.Full:
                    continue

        reader = _Reader(self, put)
        # v4 pages are parsed and mapped on forked workers, started before the reader's
        # thread (a fork needs a process with one thread); more than the requests in flight
        # would idle
        workers = self.config.workers
        if workers is None:
            workers = min(os.cpu_count() or 1, self.config.concurrency)
        if workers and self.config.api != "v3" and can_fork():
            try:
                reader.pool = PagePool(workers, reader.page_table)
            except OSError as exc:  # no processes left: the reader maps every page
                print(f"langfuse: no page workers ({exc}); mapping pages in the reader",
                      file=sys.stderr)

        def work() -> None:
            try:
                asyncio.run(reader.run())
            except _Stopped:
                return
            except BaseException as exc:  # handed to the consumer, which raises it
                try:
                    put(("error", exc))
                except _Stopped:
                    return
            else:
                try:
                    put(("end", None))
                except _Stopped:
                    return

        thread = threading.Thread(target=work, name=f"langfuse-{self.name}", daemon=True)
        thread.start()
        try:
            while True:
                kind, payload = items.get()
                if kind == "records":
                    yield payload
                elif kind == "reject":
                    yield Reject(*payload)
                elif kind == "judgments":
                    scores = ImportedScores.of(payload)
                    if scores.table.num_rows:
                        yield scores
                elif kind == "error":
                    raise payload
                else:
                    break
        finally:
            stop.set()
            thread.join(timeout=10)
            if reader.pool is not None:
                self.stats["pages_on_workers"] = reader.pool.pages
                reader.pool.close()


class _Reader:
    """The async side of one read: streams, pages, mapping, resume state, score targets."""

    def __init__(self, source: LangfuseSource, put: Callable[[tuple[str, Any]], None]) -> None:
        self.src = source
        self.cfg = source.config
        self.put = put
        self.seen: set[str] = set()
        self.scores: list[dict[str, Any]] = []
        self.buffer: list[pa.Table] = []
        self.buffered = 0
        self.state: ReadState | None = None
        # custom `fields` are coerced as the file sources coerce theirs
        self.custom = [(col, fallback_getter(path), coercer(RECORDS.field(col).type))
                       for col, path in self.cfg.fields.items()]
        self.counts = {"records": 0, "pages": 0, "duplicates": 0, "rejected": 0,
                       "scores_read": 0, "scores_imported": 0, "scores_out_of_scope": 0,
                       "resolved_by_id": 0, "unresolved": 0, "trace_context_missing": 0,
                       "scores_other_shard": 0}
        self._last_progress = time.monotonic()
        self._page_rejects: list[list[Any]] | None = None
        self.traces: dict[str, dict[str, Any]] = {}  # v3: trace context by trace id
        self.client: LangfuseClient | None = None
        # first pages requested while detecting the API generation, by stream key
        self._first: dict[str, asyncio.Future[tuple[bytes, int]]] = {}
        self.columns = pa.schema([])  # set once the API generation is known
        self.pool: PagePool | None = None  # workers mapping v4 pages of records
        self._page_columns = _schema(self.cfg, "v4")  # what page_table fills
        self._cuts: list[datetime] | None = None  # the time shards' bounds, once known

    # -- lifecycle ------------------------------------------------------------------------------

    async def run(self) -> None:
        cfg = self.cfg
        src = self.src
        async with LangfuseClient(src.host or "", cfg.concurrency, cfg.timeout_s,
                                  cfg.max_retries) as client:
            self.client = client
            try:
                streams = await self._prepare()
                self.columns = _schema(cfg, src.api)
                await _all(self._run_stream(s) for s in streams)
                if cfg.import_scores:
                    await self._import_scores()
                self._flush()
                src.complete = all(s.done and not s.failed for s in streams)
                if self.state is not None and src.complete:
                    self.state.clear()
            finally:
                await _cancel(self._first.values())  # a read that failed before using them
                if self.pool is not None:
                    self.pool.detach()
                src.stats = {**self.counts, **client.stats.as_dict()}
                if self.state is not None:
                    self.state.release()
                self._progress(final=True)

    async def _prepare(self) -> list[_Stream]:
        cfg, src = self.cfg, self.src
        saved = None
        if cfg.resume:
            state = ReadState(src.ctx.runs_dir, src.ctx.experiment, src._state_key())
            if state.acquire():
                self.state = state
                saved = state.load()
            else:
                print(f"langfuse: another process is reading with the same config; reading "
                      f"without resume state ({state.path})", file=sys.stderr)
        if saved and not saved.get("complete"):
            src.api = saved["api"]
            src.window = (mapping.parse_time(saved["window"][0]),
                          mapping.parse_time(saved["window"][1]))  # type: ignore[assignment]
            src.incremental_after = saved.get("incremental_after")
            streams = self._streams()
            progress = saved.get("streams", {})
            for s in streams:
                for k, v in progress.get(s.key, {}).items():
                    setattr(s, k, v)
            src.resumed = True
            self._replay()
            assert self.state is not None
            self.state.data = saved
            return streams
        src.window = src._resolve_window()
        src.api = cfg.api if cfg.api != "auto" else await self._detect()
        streams = self._streams()
        if self.state is not None:
            self.state.start({"api": src.api, "window": [mapping.iso(t) for t in src.window],
                              "incremental_after": src.incremental_after, "streams": {}})
        return streams

    async def _detect(self) -> str:
        """``v4`` when the server serves ``/v2/observations``, else ``v3`` (404). The probe is
        the first page of every v4 listing, requested at once and kept for the read
        (``_first``), so a v4 read does not wait a round trip before it starts."""
        self.src.api = "v4"
        self._first = {st.key: asyncio.ensure_future(self._cursor_page(st, None, st.limit))
                       for st in self._streams() if st.kind == "records"}
        done, _ = await asyncio.wait(self._first.values(), return_when=asyncio.FIRST_COMPLETED)
        if any(isinstance(task.exception(), NotFound) for task in done):
            await _cancel(self._first.values())
            self._first = {}
            return "v3"
        return "v4"  # any other failure is the stream's, raised when it reads that page

    def _replay(self) -> None:
        """Hand the runner what an interrupted read had already fetched."""
        assert self.state is not None
        for table in self.state.spooled_tables("rec-"):
            self.seen.update(table.column("record_id").to_pylist())
            self._emit(table)
        for rows in self.state.spooled_json("sc-"):
            self.scores.extend(rows)
        for rejects in self.state.spooled_json("rej-"):
            for location, reason, text in rejects:
                self._reject(location, reason, text)
        self._flush()

    # -- streams --------------------------------------------------------------------------------

    def _slices(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """``[start, end)`` cut into the slices read in parallel on v4 (``shards``)."""
        n = self.cfg.shards or self.cfg.concurrency
        step = (end - start) / n
        if step <= timedelta(0):
            return [(start, end)]
        cuts = [start + step * i for i in range(n)] + [end]
        return list(zip(cuts[:-1], cuts[1:], strict=True))

    def _streams(self) -> list[_Stream]:
        cfg, api = self.cfg, self.src.api
        assert self.src.window is not None
        start, end = self.src.records_window()
        s_start, s_end = self.src.window  # scores: the whole window, in every shard
        out: list[_Stream] = []
        if api == "v3":
            limit = min(cfg.page_size or PAGE_LIMIT, PAGE_LIMIT)
            if cfg.read == "traces":
                out.append(_Stream("rec-traces", "records", f"{_P}/traces", {
                    "fields": "core,io,metrics", "userId": cfg.user_id, "name": cfg.name,
                    "sessionId": cfg.session_id, "tags": cfg.tags or None,
                    "environment": cfg.environment or None, "fromTimestamp": mapping.iso(start),
                    "toTimestamp": mapping.iso(end)}, True, limit))
            else:
                if cfg.session_id:
                    raise SourceError("source.session_id: Langfuse v3 cannot filter "
                                      "observations by session; use read: traces, or api: v4")
                for t in cfg.types or [None]:
                    out.append(_Stream(f"rec-{t or 'all'}", "records", f"{_P}/observations",
                                       self._obs_params(t, start, end, v2=False), True, limit))
            if cfg.import_scores:
                for n in cfg.score_names or [None]:
                    out.append(_Stream(f"sc-{n or 'all'}", "scores", f"{_P}/v2/scores", {
                        "name": n, "fromTimestamp": mapping.iso(s_start),
                        "toTimestamp": mapping.iso(s_end)}, True, limit))
            return out
        obs_limit = min(cfg.page_size or CURSOR_OBSERVATIONS_LIMIT, CURSOR_OBSERVATIONS_LIMIT)
        score_limit = min(cfg.page_size or PAGE_LIMIT, PAGE_LIMIT)
        for i, (a, b) in enumerate(self._slices(start, end)):
            if cfg.read == "traces":
                params = self._obs_params(None, a, b, v2=True)
                params["isRootObservation"] = "true"
                out.append(_Stream(f"rec-roots-{i:03d}", "records", f"{_P}/v2/observations",
                                   params, False, obs_limit))
            else:
                for t in cfg.types or [None]:
                    out.append(_Stream(f"rec-{t or 'all'}-{i:03d}", "records",
                                       f"{_P}/v2/observations",
                                       self._obs_params(t, a, b, v2=True), False, obs_limit))
        for i, (a, b) in enumerate(self._slices(s_start, s_end) if cfg.import_scores else []):
            out.append(_Stream(f"sc-{i:03d}", "scores", f"{_P}/v3/scores", {
                "name": ",".join(cfg.score_names) or None, "fields": "details,subject",
                "fromTimestamp": mapping.iso(a), "toTimestamp": mapping.iso(b)},
                False, score_limit))
        return out

    def _obs_params(self, obs_type: str | None, start: datetime, end: datetime,
                    v2: bool) -> dict[str, Any]:
        cfg = self.cfg
        params: dict[str, Any] = {}
        if v2:  # v2 truncates metadata values to 200 characters unless named here
            params = {"fields": mapping.v2_fields(cfg.field_paths()),
                      "expandMetadata": ",".join(cfg.expand_metadata) or None}
        if not cfg.tags:
            params.update({"type": obs_type, "name": cfg.name, "userId": cfg.user_id,
                           "level": cfg.level, "environment": cfg.environment or None,
                           "fromStartTime": mapping.iso(start),
                           "toStartTime": mapping.iso(end)})
            if v2:
                params["sessionId"] = cfg.session_id
            return params
        # tags are only filterable through `filter`, which then replaces every simple param
        conds: list[dict[str, Any]] = [
            {"type": "datetime", "column": "startTime", "operator": ">=",
             "value": mapping.iso(start)},
            {"type": "datetime", "column": "startTime", "operator": "<",
             "value": mapping.iso(end)},
            {"type": "arrayOptions", "column": "tags" if v2 else "traceTags",
             "operator": "all of", "value": list(cfg.tags)},
        ]
        for column, value in (("type", obs_type), ("name", cfg.name), ("userId", cfg.user_id),
                              ("level", cfg.level),
                              ("sessionId", cfg.session_id if v2 else None)):
            if value is not None:
                conds.append({"type": "string", "column": column, "operator": "=",
                              "value": value})
        if cfg.environment:
            conds.append({"type": "stringOptions", "column": "environment",
                          "operator": "any of", "value": list(cfg.environment)})
        params["filter"] = json.dumps(conds)
        return params

    async def _run_stream(self, st: _Stream) -> None:
        if st.done:
            return
        try:
            if st.paged:
                await self._run_paged(st)
            else:
                await self._run_cursor(st)
        except (_StreamFailed, NotJson) as exc:
            st.failed = str(exc)
            self._reject(f"GET {st.path}", f"stream {st.key} stopped: {exc}", None)
        except NotFound as exc:
            raise SourceError(f"langfuse: {exc}; this server does not serve the API "
                              f"generation '{self.src.api}' (source.api); use api: auto") from None

    async def _run_paged(self, st: _Stream) -> None:
        if st.total_items is None:
            await self._page(st, 1)
        assert st.total_items is not None
        pages = max(1, math.ceil(st.total_items / st.limit))
        await _all(self._page(st, p) for p in range(1, pages + 1) if p not in st.pages_done)
        st.done = True
        self._save(st)

    async def _page(self, st: _Stream, page: int) -> None:
        items = await self._range(st, (page - 1) * st.limit, page * st.limit, st.limit)
        if st.kind == "records":
            await self._add_trace_context(items)
        self._on_page(st, items, page, f"GET {st.path} page {page}")
        st.pages_done.append(page)
        self._save(st)

    async def _range(self, st: _Stream, first: int, stop: int, limit: int) -> list[Any]:
        """Items ``first``..``stop-1`` (0-based) of a page-based listing, asking for
        ``limit`` per page and halving it on 422."""
        assert self.client is not None
        out: list[Any] = []
        for page in range(first // limit + 1, (stop - 1) // limit + 2):
            try:
                body = await self.client.get(st.path, {**st.params, "page": page,
                                                       "limit": limit})
            except TooHeavy as exc:
                out.extend(await self._range(st, max(first, (page - 1) * limit),
                                             min(stop, page * limit), _halved(limit, exc)))
                continue
            data = _data(body, st.path)
            meta = body.get("meta") or {}
            if st.total_items is None:
                total = meta.get("totalItems")
                if not isinstance(total, int):
                    raise _StreamFailed(f"page {page} has no meta.totalItems")
                st.total_items = total
            base = (page - 1) * limit
            out.extend(item for j, item in enumerate(data) if first <= base + j < stop)
        return out

    async def _run_cursor(self, st: _Stream) -> None:
        """Follow one cursor to its end. Each page's cursor is read from the end of its body,
        and the next page requested before this one is parsed: it is in flight while this
        page is mapped."""
        pending = self._first.pop(st.key, None) or \
            asyncio.ensure_future(self._cursor_page(st, st.cursor, st.limit))
        try:
            while True:
                body, limit = await pending
                cursor = _meta_cursor(body, f"GET {st.path} page {st.seq + 1}")
                if cursor is not None:
                    pending = asyncio.ensure_future(self._cursor_page(st, cursor, limit))
                    await asyncio.sleep(0)  # lets the request go out before this page is parsed
                # mapped on a worker when one is there and the page maps whole, else here
                table = await self.pool.map(body) \
                    if self.pool is not None and st.kind == "records" else None
                items: list[Any] = []
                columns = None
                if table is None:  # no worker, or it declined (then typed fails again, fast)
                    with gc_paused():
                        if st.kind == "records":
                            table = self._typed_table(body)
                        if table is None:
                            items, columns = self._decode(st, body)
                st.seq += 1
                self._on_page(st, items, st.seq, f"GET {st.path} page {st.seq}", columns, table)
                st.cursor, st.done = cursor, cursor is None
                self._save(st)
                if st.done:
                    return
        finally:
            if not pending.done():
                pending.cancel()

    def _decode(self, st: _Stream, body: bytes) -> tuple[list[Any], dict[str, Any] | None]:
        """A cursor page's items, or for records its mapped columns (when every item maps:
        the items then die here, with the collector paused)."""
        items = _data(orjson.loads(body), st.path)
        if st.kind == "records":
            try:
                return [], self._columns(items, None)
            except _MAP_ERRORS:
                pass  # _records finds the items that do not map
        return items, None

    async def _cursor_page(self, st: _Stream, cursor: str | None, limit: int
                           ) -> tuple[bytes, int]:
        """The body of one page after ``cursor`` and the page size that worked (halved on
        422)."""
        assert self.client is not None
        while True:
            try:
                body = await self.client.get(st.path, {**st.params, "limit": limit,
                                                       "cursor": cursor}, raw=True)
            except TooHeavy as exc:
                limit = _halved(limit, exc)
                continue
            return body, limit

    def _save(self, st: _Stream) -> None:
        if self.state is not None:
            self.state.data.setdefault("streams", {})[st.key] = st.progress()
            self.state.save()

    # -- pages → records and scores -------------------------------------------------------------

    def page_table(self, body: bytes) -> pa.Table:
        """A v4 page of observations (its body) as a record table, duplicates included; raises
        when the body is not a page, an object does not map or a value does not fit its
        column. A worker runs it (:mod:`.workers`); the page is then mapped by
        :meth:`_decode` and :meth:`_records`, which find the rejects, whenever it raises."""
        table = self._typed_table(body)
        if table is not None:
            return table
        items = _data(orjson.loads(body), "page")
        return self._page_arrow(self._custom(items, mapping.observation_columns(
            items, self.cfg.read == "traces")))

    def _typed_table(self, body: bytes) -> pa.Table | None:
        """:meth:`page_table`'s table when the page decodes and maps whole by msgspec
        (:func:`mapping.typed_page_columns`: the same columns for a fifth less CPU, 7-8 ms a
        page of 1,000 instead of 9-10); ``None`` when it does not, or custom fields read the
        objects: the caller maps the page from orjson's parse."""
        if self.custom:
            return None
        columns = mapping.typed_page_columns(body, self.cfg.read == "traces")
        if columns is None:
            return None
        try:
            return self._page_arrow(columns)
        except _ARROW_ERRORS:
            return None

    def _page_arrow(self, columns: dict[str, Any]) -> pa.Table:
        """A page's mapped columns, with ``source``, as a table of the v4 record columns."""
        n = len(columns["record_id"])
        columns["source"] = [self.src.name] * n
        return _arrow_table(columns, n, self._page_columns)

    def _on_page(self, st: _Stream, items: list[Any], page: int, where: str,
                 columns: dict[str, Any] | None = None, table: pa.Table | None = None) -> None:
        self.counts["pages"] += 1
        # a resumed read does not fetch this page again: its rejects are kept with it
        self._page_rejects = [] if self.state is not None else None
        if st.kind == "scores":
            rows = []
            for i, raw in enumerate(items):
                try:
                    rows.append(mapping.score(raw))
                except (ValueError, TypeError, AttributeError) as exc:
                    if self._owns(f"{where} item {i}", raw):
                        self._reject(f"{where} item {i}", f"malformed score: {exc}", raw)
            self.counts["scores_read"] += len(rows)
            self.scores.extend(rows)
            if self.state is not None:
                self.state.spool_json(spool_name(st.key, page), rows)
        else:
            table = self._records(items, where, columns=columns, table=table)
            if self.state is not None:
                self.state.spool_table(spool_name(st.key, page), table)
            self._emit(table)
        if self._page_rejects:
            assert self.state is not None
            self.state.spool_json("rej-" + spool_name(st.key, page), self._page_rejects)
        self._page_rejects = None
        self._progress()

    def _records(self, items: list[Any], where: str, extra: Mapping[str, Any] | None = None,
                 columns: dict[str, Any] | None = None, table: pa.Table | None = None
                 ) -> pa.Table:
        """A page of objects (or their ``columns``, mapped already, or the ``table`` of
        :meth:`page_table`) as a record table, mapped column by column. Objects that cannot be
        mapped are rejects, found by mapping the page one object at a time once the whole page
        fails; objects already read are dropped as duplicates."""
        if table is not None:
            keep = self._new(table.column("record_id").to_pylist())
            return table if keep is None else table.take(pa.array(keep, pa.int64()))
        try:
            if columns is None:
                columns = self._columns(items, extra)
        except _MAP_ERRORS:
            good = []
            for i, raw in enumerate(items):
                try:
                    self._columns([raw], extra)
                except _MAP_ERRORS as exc:
                    self._reject(f"{where} item {i}", f"cannot map to a record: {exc}", raw)
                else:
                    good.append(raw)
            columns = self._columns(good, extra)
        n = len(columns["record_id"])
        keep = self._new(columns["record_id"])
        if keep is not None:
            taken, n = pa.array(keep, pa.int64()), len(keep)
            columns = {col: values.take(taken) if isinstance(values, pa.Array)
                       else [values[i] for i in keep] for col, values in columns.items()}
        columns["source"] = [self.src.name] * n
        return _table(columns, n, self.columns, self._reject, where)

    def _new(self, ids: list[str]) -> list[int] | None:
        """Marks ``ids`` as read; the positions of those not read before (``None``: all of
        them). Page-based listings shift while new data arrives: the same object twice."""
        seen = self.seen
        if seen.isdisjoint(ids) and len(set(ids)) == len(ids):  # the usual page, at C speed
            seen.update(ids)
            return None
        keep = []
        for i, rid in enumerate(ids):
            if rid in seen:
                self.counts["duplicates"] += 1
            else:
                seen.add(rid)
                keep.append(i)
        return keep

    def _columns(self, items: list[Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
        """The mapped columns of ``items`` with the custom ``fields`` over them (a custom
        value that is absent leaves the mapped one)."""
        if self.cfg.read == "traces" and self.src.api == "v3":
            columns = mapping.trace_columns(items)
        else:  # v4 reads a trace as its root observation
            columns = mapping.observation_columns(items, self.cfg.read == "traces", extra)
        return self._custom(items, columns)

    def _custom(self, items: list[Any], columns: dict[str, Any]) -> dict[str, Any]:
        """``columns`` with the custom ``fields`` of ``items`` over them."""
        for col, get, coerce in self.custom:
            values = [None if (v := get(raw)) is None else coerce(v) for raw in items]
            mapped = columns.get(col)
            if mapped is not None:
                if isinstance(mapped, pa.Array):
                    mapped = mapped.to_pylist()
                values = [m if v is None else v for v, m in zip(values, mapped, strict=True)]
            columns[col] = values
        return columns

    def _emit(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        self.counts["records"] += table.num_rows
        self.buffer.append(table)
        self.buffered += table.num_rows
        if self.buffered >= self.cfg.batch_size:
            self._flush()

    def _flush(self) -> None:
        if self.buffer:
            self.put(("records", pa.concat_tables(self.buffer, promote_options="default")))
        self.buffer, self.buffered = [], 0

    def _reject(self, location: str, reason: str, raw: Any) -> None:
        self.counts["rejected"] += 1
        text = json_text(raw)
        if self._page_rejects is not None:
            self._page_rejects.append([location, reason, text])
        self.put(("reject", (location, reason, text)))

    def _progress(self, final: bool = False) -> None:
        if not self.cfg.progress:
            return
        now = time.monotonic()
        if not final and now - self._last_progress < 2.0:
            return
        self._last_progress = now
        c = self.counts
        client = self.client.stats if self.client is not None else None
        retries = f", {client.retries} retries" if client and client.retries else ""
        print(f"langfuse: {'read' if final else 'reading'}: {c['records']:,} records, "
              f"{c['scores_read']:,} scores, {c['pages']:,} pages{retries}", file=sys.stderr)

    # -- scores ---------------------------------------------------------------------------------

    async def _import_scores(self) -> None:
        by_observation = self.cfg.read == "observations"
        targets: dict[str, list[dict[str, Any]]] = {}
        for sc in self.scores:
            rid = sc["observation_id"] if by_observation else (
                sc["trace_id"] if sc["observation_id"] is None else None)
            if rid is None:
                self.counts["scores_out_of_scope"] += 1
                continue
            targets.setdefault(rid, []).append(sc)
        missing = [rid for rid in targets if rid not in self.seen]
        if self.src.time_shard is not None and by_observation:
            # targets this shard did not list are mostly other shards' records: only the
            # shard whose slice holds a target's first score looks it up
            own = self.src.time_shard[0]
            mine = []
            for rid in missing:
                if self._slice_of(_first_time(targets[rid])) == own:
                    mine.append(rid)
                else:
                    self.counts["scores_other_shard"] += len(targets.pop(rid))
            missing = mine
        if missing and by_observation and self.cfg.resolve_score_targets:
            await self._resolve(missing, targets)
        rows = []
        for rid, scs in targets.items():
            if rid not in self.seen:  # a trace or observation this read does not cover (or,
                self.counts["scores_out_of_scope"] += len(scs)  # time-sharded, another's)
                continue
            rows.extend(mapping.judgment(sc, rid) for sc in scs)
        self.counts["scores_imported"] = len(rows)
        self._flush()
        if rows:
            self.put(("judgments", rows))

    async def _resolve(self, missing: list[str], targets: dict[str, list[dict[str, Any]]]
                       ) -> None:
        """Fetch observations that scores point at but the bulk listing did not return."""
        found = await self._fetch_by_id(missing)
        still = [i for i in missing if i not in found]
        if still and self.cfg.resolve_retry_s > 0:
            await asyncio.sleep(self.cfg.resolve_retry_s)  # reads right after writes lag
            found.update(await self._fetch_by_id(still))
        in_scope = []
        for obs_id in missing:
            obs = found.get(obs_id)
            if obs is None:
                self.counts["unresolved"] += 1
                score_ids = [sc["id"] for sc in targets.pop(obs_id)]
                self._reject(f"observation {obs_id}", f"referenced by score(s) "
                             f"{', '.join(score_ids)} but the server does not return it",
                             json.dumps(score_ids))
            elif not await self._mine(obs):  # another shard's slice listed it
                self.counts["scores_other_shard"] += len(targets.pop(obs_id))
            elif self._matches(obs):
                in_scope.append(obs)
            else:
                self.counts["scores_out_of_scope"] += len(targets.pop(obs_id))
        if in_scope:
            await self._add_trace_context(in_scope)
            table = self._records(in_scope, "observation by id", extra={"resolved_by_id": True})
            self.counts["resolved_by_id"] += table.num_rows
            self._emit(table)

    async def _fetch_by_id(self, ids: list[str]) -> dict[str, Any]:
        assert self.client is not None
        client = self.client
        found: dict[str, Any] = {}
        if self.src.api == "v4":
            async def batch(chunk: list[str]) -> None:
                body = await client.get(f"{_P}/v2/observations", {
                    "fields": mapping.v2_fields(self.cfg.field_paths()), "limit": len(chunk),
                    "expandMetadata": ",".join(self.cfg.expand_metadata) or None,
                    "filter": json.dumps([{"type": "stringOptions", "column": "id",
                                           "operator": "any of", "value": chunk}])})
                for obs in _data(body, "/v2/observations"):
                    if isinstance(obs, Mapping) and obs.get("id") in chunk:
                        found[obs["id"]] = obs

            await _all(batch(ids[i:i + 100]) for i in range(0, len(ids), 100))
        else:
            async def one(obs_id: str) -> None:
                try:
                    found[obs_id] = await client.get(f"{_P}/observations/{obs_id}")
                except NotFound:
                    return

            await _all(one(i) for i in ids)
        return found

    async def _add_trace_context(self, items: list[Any]) -> None:
        """v1 observations lack their trace's session, user, tags and name (v2 has them):
        fetch the traces they belong to, 100 per request, and copy those fields in."""
        if self.src.api != "v3" or self.cfg.read != "observations" or \
                not self.cfg.trace_context:
            return
        assert self.client is not None
        client = self.client
        wanted = sorted({o["traceId"] for o in items if isinstance(o, dict)
                         and isinstance(o.get("traceId"), str)} - self.traces.keys())

        async def batch(ids: list[str]) -> None:
            try:
                body = await client.get(f"{_P}/traces", {
                    "fields": "core", "limit": len(ids), "page": 1,
                    "filter": json.dumps([{"type": "stringOptions", "column": "id",
                                           "operator": "any of", "value": ids}])})
            except TooHeavy:
                if len(ids) == 1:
                    self.counts["trace_context_missing"] += 1
                    return
                half = len(ids) // 2
                await _all((batch(ids[:half]), batch(ids[half:])))
                return
            for trace in _data(body, "/traces"):
                if isinstance(trace, Mapping) and trace.get("id") in ids:
                    self.traces[trace["id"]] = {
                        "sessionId": trace.get("sessionId"), "userId": trace.get("userId"),
                        "tags": trace.get("tags"), "traceName": trace.get("name")}

        await _all(batch(wanted[i:i + PAGE_LIMIT]) for i in range(0, len(wanted), PAGE_LIMIT))
        for obs in items:
            context = self.traces.get(obs.get("traceId")) if isinstance(obs, dict) else None
            if context:
                for key, value in context.items():
                    obs.setdefault(key, value)

    def _slice_of(self, when: datetime | None) -> int:
        """The time shard whose slice holds ``when`` (times outside the window: the nearest)."""
        if self._cuts is None:
            self._cuts = self.src.cuts()
        cuts = self._cuts
        if when is None:
            return 0
        return min(max(bisect.bisect_right(cuts, when) - 1, 0), len(cuts) - 2)

    async def _mine(self, obs: Mapping[str, Any]) -> bool:
        """Whether an observation this time shard fetched by id (a score target it did not
        list) is its record: yes unless it starts in another shard's slice and that shard's
        listing returns it, which a listing of the millisecond it starts in tells (a listing
        can miss an object, langfuse/langfuse#12842: no shard has it then, and the one that
        looked it up keeps it, as the unsharded read does). Not time-sharded: always."""
        if self.src.time_shard is None:
            return True
        assert self.src.window is not None
        try:
            start = mapping.parse_time(obs.get("startTime"))
        except ValueError:
            start = None
        if self._cuts is None:
            self._cuts = self.src.cuts()
        # the window as the listings ask for it (whole milliseconds)
        if start is None or not self._cuts[0] <= start < self._cuts[-1] or \
                self._slice_of(start) == self.src.time_shard[0]:
            return True
        return not await self._listed(obs, start)

    async def _listed(self, obs: Mapping[str, Any], start: datetime) -> bool:
        """Whether the records listing returns ``obs``: the listing of the millisecond it
        starts in, with this read's filters (one small request)."""
        assert self.client is not None
        unit = timedelta(milliseconds=1)
        a = _EPOCH + unit * ((start - _EPOCH) // unit)
        obs_type = obs.get("type") if self.cfg.types else None
        if self.src.api == "v4":
            path = f"{_P}/v2/observations"
            params = {**self._obs_params(obs_type, a, a + unit, v2=True), "fields": "core",
                      "expandMetadata": None, "limit": CURSOR_OBSERVATIONS_LIMIT}
        else:
            path = f"{_P}/observations"
            params = {**self._obs_params(obs_type, a, a + unit, v2=False), "page": 1,
                      "limit": PAGE_LIMIT}
        body = await self.client.get(path, params)
        return any(isinstance(o, Mapping) and o.get("id") == obs.get("id")
                   for o in _data(body, path))

    def _owns(self, location: str, raw: Any) -> bool:
        """Whether a malformed score (every time shard lists every score) is this shard's
        reject: the shard its location and text hash to, so it is rejected once."""
        if self.src.time_shard is None:
            return True
        index, count = self.src.time_shard
        key = f"{location}\n{json_text(raw)}".encode()
        digest = hashlib.blake2b(key, digest_size=8).digest()
        return int.from_bytes(digest, "big") % count == index

    def _matches(self, obs: Mapping[str, Any]) -> bool:
        """Whether an observation fetched by id passes the filters it can be checked on."""
        cfg = self.cfg
        return ((not cfg.types or obs.get("type") in cfg.types)
                and (cfg.name is None or obs.get("name") == cfg.name)
                and (cfg.level is None or obs.get("level") == cfg.level)
                and (not cfg.environment or obs.get("environment") in cfg.environment))


async def _all(coros: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``coros`` concurrently; when one fails, cancel the rest before raising."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        await _cancel(tasks)
        raise


async def _cancel(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait for them, their outcome (a result, an error) dropped."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def time_slices(start: datetime, end: datetime, index: int, count: int
                ) -> tuple[datetime, datetime]:
    """Slice ``index`` of ``count`` of ``[start, end)``: half-open, in whole milliseconds (what
    the API takes), each slice's end the next one's start, computed in integers from the bounds
    alone, so every machine cuts the same slices and a record on a cut is in exactly one."""
    unit = timedelta(milliseconds=1)
    lo = (start - _EPOCH) // unit
    hi = max(lo, (end - _EPOCH) // unit)
    return (_EPOCH + unit * (lo + (hi - lo) * index // count),
            _EPOCH + unit * (lo + (hi - lo) * (index + 1) // count))


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _first_time(scores: list[dict[str, Any]]) -> datetime | None:
    """The earliest timestamp of ``scores`` (None when none has one)."""
    times = []
    for sc in scores:
        try:
            when = mapping.parse_time(sc.get("timestamp"))
        except ValueError:
            continue
        if when is not None:
            times.append(when)
    return min(times, default=None)


def _meta_cursor(body: bytes, where: str = "page") -> str | None:
    """A cursor page's ``meta.cursor``. Langfuse sends ``meta`` after ``data``: it is read from
    the end of the body, without parsing the page. A body that does not end with the member
    ``"meta": {...}`` (the only way the end parses as ``{"meta": ...}``) is parsed whole."""
    at = body.rfind(b'"meta"', max(0, len(body) - 4096))
    if at > 0 and body[max(0, at - 8):at].rstrip()[-1:] in (b",", b"{"):
        try:
            return (orjson.loads(b"{" + body[at:]).get("meta") or {}).get("cursor") or None
        except orjson.JSONDecodeError:
            pass
    parsed = parse_body(body, where)
    meta = parsed.get("meta") if isinstance(parsed, Mapping) else None
    return (meta or {}).get("cursor") or None


_MAP_ERRORS = (ValueError, TypeError, AttributeError, OverflowError)
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


class _StreamFailed(Exception):
    """A listing cannot go on (422 at the smallest page, a response without its metadata)."""


def _halved(limit: int, exc: TooHeavy) -> int:
    """The page size to ask for after a 422 at ``limit``; a listing that is too heavy even
    one item at a time cannot go on."""
    if limit == 1:
        raise _StreamFailed(f"{exc} even with limit=1") from None
    return limit // 2


def _data(body: Any, path: str) -> list[Any]:
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, list):
        raise _StreamFailed(f"{path} answered without a data list: {str(body)[:200]}")
    return data


def _schema(cfg: LangfuseSourceConfig, api: str | None) -> pa.Schema:
    """The record columns a read fills: the mapped ones, ``source``, the custom fields."""
    mapped = mapping.TRACE_COLUMNS if cfg.read == "traces" and api == "v3" \
        else mapping.OBSERVATION_COLUMNS
    return pa.schema([RECORDS.field(c) for c in dict.fromkeys([*mapped, "source", *cfg.fields])])


def _table(columns: dict[str, Any], n: int, schema: pa.Schema,
           reject: Callable[[str, str, Any], None], where: str) -> pa.Table:
    """Mapped columns as a record table, one Arrow conversion per column; when a value does
    not fit its column, the rows are converted one by one and those that fail are rejects."""
    try:
        return _arrow_table(columns, n, schema)
    except _ARROW_ERRORS:
        pass
    values = {col: v.to_pylist() if isinstance(v, pa.Array) else v for col, v in columns.items()}
    good = []
    for row in ({col: v[i] for col, v in values.items()} for i in range(n)):
        try:
            pa.Table.from_pylist([row], schema=schema)
        except _ARROW_ERRORS as exc:
            reject(f"{where} record {row.get('record_id')}", f"bad value: {exc}", None)
        else:
            good.append(row)
    return pa.Table.from_pylist(good, schema=schema)


def _arrow_table(columns: dict[str, Any], n: int, schema: pa.Schema) -> pa.Table:
    """``n`` rows of mapped columns as a table of ``schema``, one Arrow conversion per column
    (a column not mapped is null); raises when a value does not fit its column."""
    return pa.Table.from_arrays([_array(columns.get(f.name), n, f.type) for f in schema],
                                schema=schema)


def _array(values: Any, n: int, typ: pa.DataType) -> pa.Array:
    if values is None:
        return pa.nulls(n, typ)
    return values if isinstance(values, pa.Array) else pa.array(values, typ)
