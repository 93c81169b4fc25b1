"""One run: source → filters → judges → metrics → alerts, streamed batch by batch into a run
directory. Filters mark and never drop; judges see included records only (unless they ask
for all), excluded ones get ``status='skipped'`` judgments that say why."""

from __future__ import annotations

import asyncio
import operator
import os
import secrets
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit._arrow import one_array, one_batch
from evalkit.config import PluginInstance, RunConfig
from evalkit.context import RunContext
from evalkit.errors import EvalkitError, RunFailed
from evalkit.results.schemas import JUDGMENTS, METRICS, RECORDS, conform
from evalkit.results.writer import RunWriter, run_connection


def new_run_id() -> str:
    """Sortable by time, unique across the processes of a sweep."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    manifest: dict[str, Any]
    metrics: pa.Table
    alerts: pa.Table
    judgment_counts: dict[str, dict[str, int]] = field(default_factory=dict)


def _make(inst: PluginInstance, ctx: RunContext) -> Any:
    return inst.cls(inst.name, inst.config, ctx)


def _apply_filters(table: pa.Table, filters: list[tuple[PluginInstance, Any]],
                   timings: dict[str, float]) -> pa.Table:
    excluded_by = table.column("excluded_by")
    reason = table.column("exclude_reason")
    batch = one_batch(table)
    for inst, plugin in filters:
        t0 = time.perf_counter()
        marks = plugin.mark(batch)
        if len(marks) != table.num_rows:
            raise EvalkitError(f"filters.{inst.name}: plugin '{inst.plugin}' returned "
                               f"{len(marks)} marks for {table.num_rows} records")
        marks = pa.array(marks, pa.string()) if not isinstance(marks, pa.Array) else marks
        newly = pc.and_(pc.is_null(excluded_by), pc.is_valid(marks))
        excluded_by = pc.if_else(newly, inst.name, excluded_by)
        reason = pc.if_else(newly, marks, reason)
        timings[f"filter.{inst.name}"] = timings.get(f"filter.{inst.name}", 0.0) + \
            time.perf_counter() - t0
    idx = table.schema.get_field_index
    table = table.set_column(idx("excluded_by"), "excluded_by", excluded_by)
    return table.set_column(idx("exclude_reason"), "exclude_reason", reason)


class _RecordOrder:
    """Where a batch's excluded and included records sit, to write a judge's skipped and
    computed judgments as one part in record order. When every judge's judgments are in the
    records' order, one per record, the run's metrics line them up with the records by
    position instead of joining on record_id (see ``metrics._judged``)."""

    def __init__(self, marked: pa.ChunkedArray, included_ids: pa.ChunkedArray) -> None:
        self.marked = marked
        self.included_ids = included_ids
        self._rows: pa.Array | None = None

    def parts(self, skipped: pa.Table | None, computed: pa.Table | None) -> list[pa.Table]:
        """One judge's judgments of the batch: skipped and computed as one table in record
        order when the judge gave one judgment per included record, in their order (the
        usual case); else as they came."""
        parts = [t for t in (skipped, computed) if t is not None]
        if skipped is None or computed is None or \
                computed.num_rows != len(self.included_ids) or \
                not pc.all(pc.equal(computed.column("record_id"), self.included_ids)).as_py():
            return parts
        if self._rows is None:  # the skipped rows (excluded records) first, then computed
            gone = np.asarray(self.marked.is_valid().to_numpy(zero_copy_only=False), bool)
            self._rows = pa.array(np.argsort(np.concatenate(
                [np.flatnonzero(gone), np.flatnonzero(~gone)]), kind="stable"))
        return [pa.concat_tables([skipped, computed]).take(self._rows)]


def _read_columns(plugins: list[Any]) -> list[str] | None:
    """The record columns the judges read, in the records' order, when each of them says
    (``wanted_columns()``); ``None`` (every column) when one does not. ``record_id`` is
    always in."""
    wanted = {"record_id"}
    for plugin in plugins:
        if not hasattr(plugin, "wanted_columns"):
            return None
        columns = list(plugin.wanted_columns())
        unknown = [c for c in columns if c not in RECORDS.names]
        if unknown:
            raise EvalkitError(f"judge plugin {type(plugin).__name__} reads {unknown}, which "
                               f"are not record columns; record columns: "
                               f"{', '.join(RECORDS.names)}")
        wanted.update(columns)
    return [c for c in RECORDS.names if c in wanted]


def _error_rows(record_ids: list[str], message: str) -> list[dict[str, Any]]:
    return [{"record_id": r, "status": "error", "error": message} for r in record_ids]


class _JudgeRunner:
    """Runs every configured judge over a batch and conforms what they return."""

    def __init__(self, judges: list[tuple[PluginInstance, Any]], run_id: str,
                 dry_run: bool) -> None:
        self.judges = judges
        self.run_id = run_id
        self.dry_run = dry_run
        self.timings: dict[str, float] = {}
        self.estimates: dict[str, dict[str, float]] = {}
        self.columns = _read_columns([plugin for _, plugin in judges])

    def _fill(self, inst: PluginInstance, plugin: Any) -> dict[str, Any]:
        return {"run_id": self.run_id, "judge": inst.name, "plugin": inst.plugin,
                "origin": "computed", "judge_model": getattr(plugin, "judge_model", None),
                "attempts": 1}

    def _inputs(self, plugin: Any, records: pa.Table, included: pa.Table) -> pa.Table:
        return records if getattr(plugin, "applies_to_excluded", False) else included

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
        skipped: dict[str, pa.Table] = {}
        judged: dict[str, pa.Table] = {}
        pending: list[tuple[PluginInstance, Any, pa.Table]] = []
        for inst, plugin in self.judges:
            data = self._inputs(plugin, readable, included)
            if not getattr(plugin, "applies_to_excluded", False) and excluded.num_rows:
                skipped[inst.name] = self._skipped(inst, plugin, excluded)
            if self.dry_run:
                self._estimate(inst, plugin, data)
                continue
            if hasattr(plugin, "ajudge"):
                pending.append((inst, plugin, data))
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
            judged[inst.name] = conform(result, JUDGMENTS, self._fill(inst, plugin))
        if pending:
            judged.update(zip([inst.name for inst, _, _ in pending],
                              asyncio.run(self._run_async(pending)), strict=True))
        order = _RecordOrder(marked, included.column("record_id"))
        return [part for inst, _ in self.judges
                for part in order.parts(skipped.get(inst.name), judged.get(inst.name))]

    async def _run_async(self, pending: list[tuple[PluginInstance, Any, pa.Table]]
                         ) -> list[pa.Table]:
        async def one(inst: PluginInstance, plugin: Any, data: pa.Table) -> pa.Table:
            t0 = time.perf_counter()
            try:
                result = await plugin.ajudge(data) if data.num_rows else []
            except EvalkitError:
                raise
            except Exception as exc:
                result = _error_rows(data.column("record_id").to_pylist(),
                                     f"{type(exc).__name__}: {exc}")
            self._add_time(inst, t0)
            return conform(result, JUDGMENTS, self._fill(inst, plugin))

        return list(await asyncio.gather(*(one(*p) for p in pending)))

    def _add_time(self, inst: PluginInstance, t0: float) -> None:
        key = f"judge.{inst.name}"
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t0

    def _skipped(self, inst: PluginInstance, plugin: Any, excluded: pa.Table) -> pa.Table:
        why = pc.binary_join_element_wise(
            "excluded by filter ", excluded.column("excluded_by"), ": ",
            pc.fill_null(excluded.column("exclude_reason"), ""), ""
        )
        table = pa.table({"record_id": excluded.column("record_id"),
                          "status": pa.repeat(pa.scalar("skipped"), excluded.num_rows),
                          "explanation": why})
        return conform(table, JUDGMENTS, self._fill(inst, plugin))

    def _estimate(self, inst: PluginInstance, plugin: Any, data: pa.Table) -> None:
        est = plugin.estimate(data) if hasattr(plugin, "estimate") else {"calls": 0}
        acc = self.estimates.setdefault(inst.name, {})
        for k, v in est.items():
            if v is None or acc.get(k, 0) is None:
                acc[k] = None  # an unknown price stays unknown
            else:
                acc[k] = acc.get(k, 0) + v


_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
        "==": operator.eq, "!=": operator.ne}
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def evaluate_alerts(rc: RunConfig, metrics: pa.Table, run_id: str) -> list[dict[str, Any]]:
    """One alert row per (threshold, metric row) that crosses it, and a warning for each
    threshold on a metric the run did not produce."""
    rows = []
    metric_rows = metrics.to_pylist()
    for alert in rc.alerts:
        watched = [m for m in metric_rows if m["metric"] == alert.metric]
        if not watched:
            rows.append({"run_id": run_id, "metric": alert.metric, "slice": alert.slice,
                         "value": None, "operator": alert.operator, "threshold": alert.value,
                         "severity": "warning",
                         "message": f"alert on '{alert.metric}' watches a metric this run "
                         "did not produce"})
        for m in watched:
            if alert.slice != "*" and m["slice"] != alert.slice:
                continue
            if m["value"] is None or not _OPS[alert.operator](m["value"], alert.value):
                continue
            msg = alert.message or (f"{m['metric']} [{m['slice']}] = {m['value']:.4g} "
                                    f"{alert.operator} {alert.value:g}")
            rows.append({"run_id": run_id, "metric": m["metric"], "slice": m["slice"],
                         "value": m["value"], "operator": alert.operator,
                         "threshold": alert.value, "severity": alert.severity,
                         "message": msg})
    return rows


class _Judging:
    """Judges each batch and writes its judgments (then the scores its records imported), in
    batch order. When every judge is ``thread_safe`` (the deterministic built-ins; never in a
    dry run) and the source parses its input on worker processes (``parses_beside``: a large
    JSONL file), a batch is judged on a thread while the run's thread takes the next one:
    Arrow, numpy and the Parquet writer leave the interpreter free, so the two share the
    cores (1M records: 3% less wall time for the same CPU). A source that parses on the
    run's thread would hold the interpreter against the judges (100k records in one
    process: 15% slower), so its batches are judged in line. One batch is judged at a time:
    a judge is never called twice at once."""

    def __init__(self, runner: _JudgeRunner, writer: RunWriter, source: Any) -> None:
        self.runner = runner
        self.writer = writer
        self.source = source
        plugins = [plugin for _, plugin in runner.judges]
        self.can_overlap = bool(plugins) and not runner.dry_run and \
            (os.cpu_count() or 1) > 1 and \
            all(getattr(plugin, "thread_safe", False) for plugin in plugins)
        self.pool: ThreadPoolExecutor | None = None
        self.pending: tuple[Future[list[pa.Table]], list[pa.Table]] | None = None

    def submit(self, records: pa.Table, imported: list[pa.Table]) -> None:
        """Judge ``records`` (then write ``imported``, the scores they carried)."""
        if self.can_overlap:  # decided at the first batch, once the source has started
            self.can_overlap = False
            if getattr(self.source, "parses_beside", False):
                self.pool = ThreadPoolExecutor(1, thread_name_prefix="evalkit-judges")
        if self.pool is None:
            self._write(self.runner.run(records), imported)
            return
        self.finish()
        self.pending = (self.pool.submit(self.runner.run, records), imported)

    def finish(self) -> None:
        """Write what the batch being judged gave (its judge's error is raised here)."""
        if self.pending is not None:
            future, imported = self.pending
            self.pending = None
            self._write(future.result(), imported)

    def _write(self, parts: list[pa.Table], imported: list[pa.Table]) -> None:
        for part in [*parts, *imported]:
            self.writer.add_judgments(part)

    def close(self) -> None:
        """End the thread; after a failure, once the batch being judged is done (its
        judgments are not written)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _compute_metrics(rc: RunConfig, ctx: RunContext, timings: dict[str, float]
                     ) -> list[pa.Table]:
    """Each metric's rows, in config order. When every metric is ``thread_safe`` (the
    built-in ones: they read the run through the connection they are given and keep no other
    state), they are computed on a thread per core, each thread with its own DuckDB cursor:
    DuckDB and numpy leave the interpreter free, so the second core, idle once the records
    are written, takes half the work. Metrics of the same judge and slices (a rate and a mean)
    share a thread and a cursor, hence one judged table (``metrics._judged``)."""
    con = run_connection(ctx.run_dir)
    try:
        plugins = [(inst, _make(inst, ctx)) for inst in rc.metrics]

        def compute(inst: PluginInstance, plugin: Any, cursor: Any) -> pa.Table:
            t1 = time.perf_counter()
            fill = {"run_id": ctx.run_id, "plugin": inst.plugin, "metric": inst.name,
                    "higher_is_better": getattr(plugin, "higher_is_better", None)}
            table = conform(plugin.compute(cursor), METRICS, fill)
            timings[f"metric.{inst.name}"] = time.perf_counter() - t1
            return table

        cores = os.cpu_count() or 1
        if cores < 2 or len(plugins) < 2 or \
                not all(getattr(plugin, "thread_safe", False) for _, plugin in plugins):
            return [compute(inst, plugin, con) for inst, plugin in plugins]
        groups: dict[Any, list[int]] = {}
        for k, (inst, _) in enumerate(plugins):
            judge = getattr(inst.config, "judge", None)
            key = (judge, tuple(getattr(inst.config, "slice_by", ()))) if judge else k
            groups.setdefault(key, []).append(k)
        out: list[pa.Table | None] = [None] * len(plugins)

        def compute_group(members: list[int]) -> None:
            cursor = con.cursor()
            try:
                for k in members:
                    out[k] = compute(*plugins[k], cursor)
            finally:
                cursor.close()

        with ThreadPoolExecutor(min(cores, len(groups)),
                                thread_name_prefix="evalkit-metrics") as pool:
            for future in [pool.submit(compute_group, g) for g in groups.values()]:
                future.result()
        return [table for table in out if table is not None]
    finally:
        con.close()


def _versions(rc: RunConfig) -> dict[str, str]:
    """The version of evalkit and of every distribution whose plugin this run used."""
    from importlib.metadata import version

    from evalkit.registry import registry

    out = {"evalkit": version("evalkit")}
    reg = registry()
    for inst in [rc.source, *rc.filters, *rc.judges, *rc.metrics, *rc.sinks]:
        entry = reg.entries(inst.kind)[inst.plugin][0]
        out[entry.distribution] = entry.version
    return out


def _push(sinks: list[tuple[PluginInstance, Any]], run_dir: Path) -> dict[str, Any]:
    """Each sink's report. A sink that fails is reported, not raised: the run itself is done."""
    reports: dict[str, Any] = {}
    for inst, sink in sinks:
        try:
            reports[inst.name] = report = sink.push(run_dir)
        except Exception as exc:
            reports[inst.name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"evalkit: sink {inst.name} failed: {exc}", file=sys.stderr)
            continue
        if report.get("failed"):
            print(f"evalkit: sink {inst.name}: {report['failed']} item(s) failed; see "
                  f"sinks.{inst.name} in {run_dir / 'manifest.json'}", file=sys.stderr)
    return reports


def execute(rc: RunConfig) -> RunResult:
    """Run ``rc`` end to end; write the run directory; print the summary."""
    from evalkit.runner.summary import print_summary

    started = datetime.now(timezone.utc)
    t_start = time.perf_counter()
    run_id = rc.runner.run_id or new_run_id()
    runs_dir = Path(rc.runner.runs_dir)
    run_dir = runs_dir / rc.experiment / run_id
    if (run_dir / "manifest.json").exists():
        raise EvalkitError(f"runner.run_id: a run '{run_id}' already exists in {run_dir}; "
                           "choose another run_id or leave it unset")
    cache_dir = Path(rc.runner.cache_dir or os.environ.get("EVALKIT_CACHE_DIR")
                     or Path.home() / ".cache" / "evalkit")
    ctx = RunContext(run_id=run_id, experiment=rc.experiment, run_dir=run_dir,
                     runs_dir=runs_dir, cache_dir=cache_dir, dry_run=rc.runner.dry_run)
    # plugins are built before the run directory exists: a bad path or setting leaves no trace
    source = _make(rc.source, ctx)
    filters = [(i, _make(i, ctx)) for i in rc.filters]
    judges = [(i, _make(i, ctx)) for i in rc.judges]
    sinks = [(i, _make(i, ctx)) for i in rc.sinks]
    judge_runner = _JudgeRunner(judges, run_id, rc.runner.dry_run)
    writer = RunWriter(run_dir)
    timings: dict[str, float] = {}
    manifest: dict[str, Any] = {
        "run_id": run_id, "experiment": rc.experiment, "status": "running",
        "started_at": started.isoformat(), "overrides": rc.overrides,
        "run_dir": str(run_dir), "config": rc.composed,
    }
    judging = _Judging(judge_runner, writer, source)
    n_excluded: dict[str, int] = {}
    try:
        t0 = time.perf_counter()
        for batch in source.read():
            timings["read"] = timings.get("read", 0.0) + time.perf_counter() - t0
            table = conform(batch, RECORDS, {"run_id": run_id})
            table = _apply_filters(table, filters, timings)
            vc = pc.value_counts(one_array(table.column("excluded_by")))
            for item in vc.to_pylist():
                if item["values"] is not None:
                    n_excluded[item["values"]] = n_excluded.get(item["values"], 0) + \
                        item["counts"]
            t1 = time.perf_counter()
            writer.add_records(table)
            timings["write"] = timings.get("write", 0.0) + time.perf_counter() - t1
            judging.submit(table, list(ctx.imported))
            ctx.imported.clear()
            t0 = time.perf_counter()
        judging.finish()
        for part in ctx.imported:
            writer.add_judgments(part)
        ctx.imported.clear()
        writer.finish_records()
        timings.update(judge_runner.timings)

        t0 = time.perf_counter()
        # a run without metrics never starts DuckDB
        metric_tables = _compute_metrics(rc, ctx, timings) if rc.metrics else []
        metrics = pa.concat_tables(metric_tables) if metric_tables else METRICS.empty_table()
        metrics = writer.write_table("metrics", metrics)
        alerts = writer.write_table("alerts", evaluate_alerts(rc, metrics, run_id))
        rejects = writer.write_table("rejects", [{"run_id": run_id, **r} for r in ctx.rejects])
        timings["metrics"] = time.perf_counter() - t0
    except BaseException as exc:
        judging.close()  # (before the files it would write to go)
        writer.abort()
        manifest.update(status="failed", error=f"{type(exc).__name__}: {exc}",
                        finished_at=datetime.now(timezone.utc).isoformat(),
                        duration_s=time.perf_counter() - t_start)
        writer.write_manifest(manifest)
        raise
    finally:
        judging.close()
        for _, plugin in judges:
            close = getattr(plugin, "close", None)
            if close is not None:
                close()

    counts: dict[str, dict[str, int]] = {}
    cost = 0.0
    unpriced = 0
    for (judge, status), (n, c, u) in sorted(writer.judgment_stats.items()):
        counts.setdefault(judge, {})[status] = n
        cost += c or 0.0
        unpriced += u
    versions = _versions(rc)
    manifest.update(
        status="ok",
        finished_at=datetime.now(timezone.utc).isoformat(),
        duration_s=round(time.perf_counter() - t_start, 4),
        n_records=writer.n_records,
        n_excluded=sum(n_excluded.values()),
        n_rejects=len(ctx.rejects),
        n_judgments=writer.n_judgments,
        judge_cost_usd=cost,
        judge_calls_unpriced=unpriced,
        excluded_by=n_excluded,
        judgments=counts,
        dry_run=rc.runner.dry_run,
        dry_run_estimates=judge_runner.estimates if rc.runner.dry_run else None,
        evalkit_version=versions["evalkit"],
        versions=versions,
        sources={rc.source.name: source.fingerprint() if hasattr(source, "fingerprint")
                 else {}},
        timings={k: round(v, 4) for k, v in timings.items()},
    )
    writer.write_manifest(manifest)
    if sinks and not rc.runner.dry_run:
        manifest["sinks"] = _push(sinks, run_dir)
        writer.write_manifest(manifest)
    result = RunResult(run_id, run_dir, manifest, metrics, alerts, counts)
    if rc.runner.summary:
        print_summary(rc, result, rejects)
    worst = rc.runner.fail_on
    if worst is not None:
        fired = [a for a in alerts.to_pylist()
                 if _SEVERITY_RANK[a["severity"]] >= _SEVERITY_RANK[worst]]
        if fired:
            raise RunFailed(f"{len(fired)} alert(s) at or above runner.fail_on={worst}: "
                            + "; ".join(a["message"] for a in fired[:3]))
    return result
