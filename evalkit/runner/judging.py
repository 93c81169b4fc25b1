"""Judging a run's batches: every judge over each batch (skipped judgments for the records a
filter set aside), in record order, and the thread that judges a batch while the run reads
the next."""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.config import PluginInstance
from evalkit.errors import EvalkitError
from evalkit.plugin import AsyncJudge, Judge, JudgeResult, Source
from evalkit.redact import mask
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import RunWriter

__all__ = ["JudgeRunner", "Judging"]


class _RecordOrder:
    """Where a batch's excluded and included records sit, to write a judge's skipped and
    computed judgments as one part in record order. So every judge's judgments of a run are
    in the records' order, one per record, and the run's metrics can line them up with the
    records by position instead of joining on record_id (``metrics._judged``, which checks
    it first: imported scores follow no such rule)."""

    def __init__(self, skipped: pa.Array | pa.ChunkedArray) -> None:
        self.skipped = skipped  # true for each record the judge skipped
        self._rows: pa.Array | None = None

    def parts(self, skipped: pa.Table | None, computed: pa.Table | None) -> list[pa.Table]:
        """One judge's judgments of the batch: skipped and computed (one per included record,
        in their order: :func:`_one_per_record`) as one table in record order."""
        if skipped is None or computed is None:
            return [t for t in (skipped, computed) if t is not None]
        if self._rows is None:  # the skipped rows first, then computed
            gone = np.asarray(self.skipped.to_numpy(zero_copy_only=False), bool)
            self._rows = pa.array(np.argsort(np.concatenate(
                [np.flatnonzero(gone), np.flatnonzero(~gone)]), kind="stable"))
        return [pa.concat_tables([skipped, computed]).take(self._rows)]


def _one_per_record(result: pa.Table, ids: pa.ChunkedArray, fill: dict[str, Any]) -> pa.Table:
    """A judge's ``result`` in the order of the records it was given (``ids``), one judgment
    each: the contract of :class:`evalkit.plugin.Judge`. A result that breaks it becomes an
    error judgment for every record, naming the breach (as a judge that raises)."""
    got = result.column("record_id")
    if result.num_rows == len(ids) and not got.null_count and \
            (not len(ids) or pc.all(pc.equal(got, ids)).as_py()):
        return result  # the usual case: one per record, in their order
    at = pc.index_in(ids, value_set=got)  # where each record's (first) judgment is
    given = pc.is_in(got, value_set=ids)
    counts = pc.value_counts(got.filter(given))
    breaches = [(at.null_count, "record", "without a judgment"),
                (pc.sum(pc.greater(counts.field("counts"), 1)).as_py() or 0, "record",
                 "judged more than once"),
                (len(got) - (pc.sum(given).as_py() or 0), "judgment",
                 "of a record it was not given")]
    found = [f"{n} {what}{'s' * (n != 1)} {why}" for n, what, why in breaches if n]
    if not found:
        return result.take(at)
    message = (f"the judge returned {result.num_rows} judgments for {len(ids)} records "
               f"({', '.join(found)}); a judge must return exactly one judgment per record "
               "it is given")
    return conform(_error_rows(ids.to_pylist(), message), JUDGMENTS, fill)


def _read_columns(plugins: list[Judge]) -> list[str] | None:
    """The record columns the judges read, in the records' order, when each of them says
    (``wanted_columns()``); ``None`` (every column) when one does not. ``record_id`` is
    always in."""
    wanted = {"record_id"}
    for plugin in plugins:
        named = plugin.wanted_columns()
        if named is None:
            return None
        columns = list(named)
        unknown = [c for c in columns if c not in RECORDS.names]
        if unknown:
            raise EvalkitError(f"judge plugin {type(plugin).__name__} reads {unknown}, which "
                               f"are not record columns; record columns: "
                               f"{', '.join(RECORDS.names)}")
        wanted.update(columns)
    return [c for c in RECORDS.names if c in wanted]


def non_finite_as_errors(table: pa.Table) -> pa.Table:
    """``table`` (judgments) with every ``ok`` row whose value is NaN or infinite made an
    error (``error_cause`` ``non_finite``, value and verdict null): whatever a judge
    computed it from (a logprob, a parsed score, its own arithmetic), such a number is never
    a score, and a mean or a rate over it would be NaN or quietly wrong."""
    value = table.column("value")
    if value.null_count == len(value):
        return table
    bad = pc.and_(pc.equal(table.column("status"), "ok"),
                  pc.invert(pc.is_finite(value)))
    bad = pc.fill_null(bad, False)
    if not pc.any(bad).as_py():
        return table
    idx = table.schema.get_field_index
    shown = pc.cast(value, pa.string())
    message = pc.binary_join_element_wise(
        "the judge's score is ", shown, ", not a finite number: an error, never a score", "")
    for name, new in (
            ("status", pc.if_else(bad, "error", table.column("status"))),
            ("error", pc.if_else(bad, message, table.column("error"))),
            ("error_cause", pc.if_else(bad, "non_finite", table.column("error_cause"))),
            ("value", pc.if_else(bad, pa.scalar(None, pa.float64()), value)),
            ("passed", pc.if_else(bad, pa.scalar(None, pa.bool_()), table.column("passed")))):
        table = table.set_column(idx(name), name, new)
    return table


def _error_rows(record_ids: list[str], message: str) -> list[dict[str, Any]]:
    message = mask(message)  # an exception may quote a URL or a key
    return [{"record_id": r, "status": "error", "error": message, "error_cause": "judge_error"}
            for r in record_ids]


def repeats_of(rc: Any, judges: list[tuple[PluginInstance, Judge]]) -> dict[str, int]:
    """How many times each judge judges a record: ``runner.judge_repeats`` for the judges it
    names, else ``runner.repeats``. A name that is not a judge of the run is an error."""
    names = [inst.name for inst, _ in judges]
    unknown = [n for n in rc.runner.judge_repeats if n not in names]
    if unknown:
        raise EvalkitError(f"runner.judge_repeats: {unknown} are not judges of this run; "
                           f"judges: {', '.join(names) or 'none'}")
    return {n: int(rc.runner.judge_repeats.get(n, rc.runner.repeats)) for n in names}


def provenance(inst: PluginInstance, plugin: Judge) -> str:
    """``judgments.produced_by`` of a judge: its model, a digest of its class and config, a
    digest of its prompt (LLM judges: ``prompt_fingerprint``), its distribution's version and
    evalkit's, as JSON. Digests only: a config's endpoint URL never reaches the table. The
    keys a config names in its ``operational`` class attribute (where and how fast calls are
    made) are left out: they do not change a verdict."""
    import dataclasses
    import hashlib
    from importlib.metadata import version

    from evalkit.registry import registry
    from evalkit.results.schemas import json_text

    config = getattr(plugin, "config", None)
    if dataclasses.is_dataclass(config):
        skip = getattr(config, "operational", frozenset())
        asked: Any = {k: v for k, v in dataclasses.asdict(config).items() if k not in skip}
    else:
        asked = repr(config)
    text = json_text([type(plugin).__module__, type(plugin).__qualname__, asked]) or ""
    entries = registry().entries("judges").get(inst.plugin)
    plugin_version = f"{entries[0].distribution}=={entries[0].version}" if entries else None
    fingerprint = getattr(plugin, "prompt_fingerprint", None)
    return json_text({"model": plugin.judge_model,
                      "config_sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
                      "prompt_sha256": fingerprint() if fingerprint is not None else None,
                      "plugin": plugin_version,
                      "evalkit": version("evalkit")}) or ""


def _for_repeat(plugin: Judge, repeat: int) -> Judge:
    """The judge as it judges repeat ``repeat``: a judge with ``for_repeat`` (the LLM
    judges: the response cache keys each repeat apart, so a repeat is a new call) gives a
    copy; any other judge is itself (a deterministic judge repeats its verdict)."""
    make = getattr(plugin, "for_repeat", None)
    return make(repeat) if make is not None and repeat else plugin


class JudgeRunner:
    """Runs every configured judge over a batch (``repeats[name]`` times) and conforms what
    they return."""

    def __init__(self, judges: list[tuple[PluginInstance, Judge]], run_id: str,
                 dry_run: bool, repeats: dict[str, int] | None = None,
                 judged_when_excluded: frozenset[str] | None = None) -> None:
        self.judges = judges
        # the excluded_by values whose records an ``applies_to_excluded`` judge still judges:
        # the filters' (and the generate stage's); a record the source set aside (an agent
        # span: no output of the system) is judged by no judge. None: every excluded record
        self.judged_when_excluded = judged_when_excluded
        self.run_id = run_id
        self.dry_run = dry_run
        self.repeats = repeats or {}
        self.produced_by = {inst.name: provenance(inst, plugin) for inst, plugin in judges}
        self.timings: dict[str, float] = {}
        self.estimates: dict[str, dict[str, float]] = {}
        self.columns = _read_columns([plugin for _, plugin in judges])

    def _fill(self, inst: PluginInstance, plugin: Judge, repeat: int = 0) -> dict[str, Any]:
        return {"run_id": self.run_id, "judge": inst.name, "plugin": inst.plugin,
                "origin": "computed", "judge_model": plugin.judge_model,
                "attempts": 1, "repeat": repeat, "produced_by": self.produced_by.get(inst.name)}

    def _inputs(self, plugin: Judge, records: pa.Table, included: pa.Table,
                set_aside: pa.Array | None) -> pa.Table:
        if not plugin.applies_to_excluded:
            return included
        return records if set_aside is None else records.filter(pc.invert(set_aside))

    def run(self, records: pa.Table) -> list[pa.Table]:
        marked = records.column("excluded_by")
        # the judges' columns alone are copied into the included records (not every prompt
        # and completion of the batch when they read a few columns)
        readable = records.select(self.columns) if self.columns else records
        included = readable.filter(pc.is_null(marked)) if marked.null_count < len(marked) \
            else readable
        # the skipped judgments need these columns only (filtering copies every column)
        excluded = records.select(["record_id", "excluded_by", "exclude_reason"]).filter(
            pc.is_valid(marked))
        # the records the source set aside (not a filter): no judge judges them
        set_aside = None
        if self.judged_when_excluded is not None and excluded.num_rows:
            set_aside = pc.and_(pc.is_valid(marked), pc.invert(pc.is_in(
                marked, pa.array(sorted(self.judged_when_excluded), pa.string()))))
            if not pc.any(set_aside).as_py():
                set_aside = None
        skipped: dict[str, pa.Table] = {}
        judged: dict[tuple[str, int], pa.Table] = {}
        pending: list[tuple[PluginInstance, Judge, pa.Table, int]] = []
        for inst, first in self.judges:
            data = self._inputs(first, readable, included, set_aside)
            if not first.applies_to_excluded and excluded.num_rows:
                skipped[inst.name] = self._skipped(inst, first, excluded)
            elif set_aside is not None:
                skipped[inst.name] = self._skipped(inst, first, records.select(
                    ["record_id", "excluded_by", "exclude_reason"]).filter(set_aside))
            for repeat in range(self.repeats.get(inst.name, 1)):
                plugin = _for_repeat(first, repeat)
                if self.dry_run:
                    self._estimate(inst, plugin, data)
                    continue
                if isinstance(plugin, AsyncJudge):
                    pending.append((inst, plugin, data, repeat))
                    continue
                t0 = time.perf_counter()
                try:
                    result = plugin.judge(data) if data.num_rows else []
                except EvalkitError:
                    raise
                except Exception as exc:  # a judge bug costs this batch's scores, not the run
                    result = _error_rows(data.column("record_id").to_pylist(),
                                         f"{type(exc).__name__}: {exc}")
                self._add_time(inst, t0)
                judged[(inst.name, repeat)] = self._conform(inst, plugin, result, data, repeat)
        if pending:
            judged.update(zip([(inst.name, r) for inst, _, _, r in pending],
                              asyncio.run(self._run_async(pending)), strict=True))
        order = _RecordOrder(pc.is_valid(marked))
        # (an applies_to_excluded judge's skipped records: the source's set-asides alone)
        aside = None if set_aside is None else _RecordOrder(set_aside)
        # repeat 0 in judgments/part-*; the other repeats (judged records only) after them
        return [part for inst, plugin in self.judges
                for part in (aside if plugin.applies_to_excluded and aside else order).parts(
                    skipped.get(inst.name), judged.get((inst.name, 0)))] + \
            [judged[(inst.name, r)] for inst, _ in self.judges
             for r in range(1, self.repeats.get(inst.name, 1)) if (inst.name, r) in judged]

    async def _run_async(self, pending: list[tuple[PluginInstance, Judge, pa.Table, int]]
                         ) -> list[pa.Table]:
        async def one(inst: PluginInstance, plugin: Judge, data: pa.Table,
                      repeat: int) -> pa.Table:
            t0 = time.perf_counter()
            try:
                result = await plugin.ajudge(data) if data.num_rows else []
            except EvalkitError:
                raise
            except Exception as exc:
                result = _error_rows(data.column("record_id").to_pylist(),
                                     f"{type(exc).__name__}: {exc}")
            self._add_time(inst, t0)
            return self._conform(inst, plugin, result, data, repeat)

        return list(await asyncio.gather(*(one(*p) for p in pending)))

    def _conform(self, inst: PluginInstance, plugin: Judge, result: JudgeResult,
                 data: pa.Table, repeat: int = 0) -> pa.Table:
        fill = self._fill(inst, plugin, repeat)
        table = _one_per_record(conform(result, JUDGMENTS, fill), data.column("record_id"),
                                fill)
        return non_finite_as_errors(table)

    def _add_time(self, inst: PluginInstance, t0: float) -> None:
        key = f"judge.{inst.name}"
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t0

    def _skipped(self, inst: PluginInstance, plugin: Judge, excluded: pa.Table) -> pa.Table:
        why = pc.binary_join_element_wise(
            "excluded by filter ", excluded.column("excluded_by"), ": ",
            pc.fill_null(excluded.column("exclude_reason"), ""), ""
        )
        table = pa.table({"record_id": excluded.column("record_id"),
                          "status": pa.repeat(pa.scalar("skipped"), excluded.num_rows),
                          "explanation": why})
        return conform(table, JUDGMENTS, self._fill(inst, plugin))

    def _estimate(self, inst: PluginInstance, plugin: Judge, data: pa.Table) -> None:
        est = plugin.estimate(data)
        acc = self.estimates.setdefault(inst.name, {})
        for k, v in est.items():
            if v is None or acc.get(k, 0) is None:
                acc[k] = None  # an unknown price stays unknown
            else:
                acc[k] = acc.get(k, 0) + v


class Judging:
    """Judges each batch and writes its judgments (then the scores its records imported), in
    batch order. When every judge is ``thread_safe`` (the deterministic built-ins; never in a
    dry run) and the source parses its input on worker processes (``parses_beside``: a large
    JSONL file), a batch is judged on a thread while the run's thread takes the next one:
    Arrow, numpy and the Parquet writer leave the interpreter free, so the two share the
    cores (1M records: 3% less wall time for the same CPU). A source that parses on the
    run's thread would hold the interpreter against the judges (100k records in one
    process: 15% slower), so its batches are judged in line. One batch is judged at a time:
    a judge is never called twice at once."""

    def __init__(self, runner: JudgeRunner, writer: RunWriter, source: Source) -> None:
        self.runner = runner
        self.writer = writer
        self.source = source
        plugins = [plugin for _, plugin in runner.judges]
        self.can_overlap = bool(plugins) and not runner.dry_run and \
            (os.cpu_count() or 1) > 1 and \
            all(plugin.thread_safe for plugin in plugins)
        self.pool: ThreadPoolExecutor | None = None
        self.pending: tuple[Future[list[pa.Table]], list[pa.Table],
                            pa.ChunkedArray] | None = None

    def submit(self, records: pa.Table, imported: list[pa.Table]) -> None:
        """Judge ``records`` (then write ``imported``, the scores they carried)."""
        if self.can_overlap:  # decided at the first batch, once the source has started
            self.can_overlap = False
            if self.source.parses_beside:
                self.pool = ThreadPoolExecutor(1, thread_name_prefix="evalkit-judges")
        ids = records.column("record_id")
        if self.pool is None:
            self._write(self.runner.run(records), imported, ids)
            return
        self.finish()
        self.pending = (self.pool.submit(self.runner.run, records), imported, ids)

    def finish(self) -> None:
        """Write what the batch being judged gave (its judge's error is raised here)."""
        if self.pending is not None:
            future, imported, ids = self.pending
            self.pending = None
            self._write(future.result(), imported, ids)

    def _write(self, parts: list[pa.Table], imported: list[pa.Table],
               ids: pa.ChunkedArray) -> None:
        for part in [*parts, *imported]:
            repeat = part.column("repeat")[0].as_py() \
                if part.num_rows and "repeat" in part.column_names else None
            if repeat:
                self.writer.add_repeats(part)
            else:
                self.writer.add_judgments(part)
        self.writer.end_batch(ids)  # (a resume keeps this batch's parts from here on)

    def close(self) -> None:
        """End the thread; after a failure, once the batch being judged is done (its
        judgments are not written)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


