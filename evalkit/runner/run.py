"""One run: source → filters → judges → metrics → alerts, streamed batch by batch into a run
directory. Filters mark and never drop; judges see included records only (unless they ask
for all), excluded ones get ``status='skipped'`` judgments that say why."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit._arrow import one_array, one_batch
from evalkit._faults import point
from evalkit.config import PluginInstance, RunConfig
from evalkit.context import RunContext
from evalkit.errors import EvalkitError, RunDirError, RunInterrupted
from evalkit.plugin import ImportedScores, Reject
from evalkit.redact import mask
from evalkit.results.names import run_dir_of
from evalkit.results.schemas import JUDGMENTS, METRICS, conform
from evalkit.results.storage import is_remote, writer_tag
from evalkit.results.writer import RunWriter
from evalkit.runner.alerts import (
    check_alerts,
    check_judge_errors,
    evaluate_alerts,
    raise_on_fired,
)
from evalkit.runner.anchor import anchor_rows, read_anchor
from evalkit.runner.baseline import check_baseline, find_baseline
from evalkit.runner.coalesce import coalesced
from evalkit.runner.generate import Generating
from evalkit.runner.hints import unmatched_fields, warn
from evalkit.runner.judging import JudgeRunner, Judging, non_finite_as_errors, repeats_of
from evalkit.runner.lifecycle import Claim, Staged, claim, run_id_of, stage_remote
from evalkit.runner.limit import limited
from evalkit.runner.metrics import compute_metrics
from evalkit.runner.references import check_metric_references
from evalkit.runner.result import RunResult
from evalkit.runner.shard import runner_cut, sharded
from evalkit.runner.summary import merge_endpoint_stats, offline_judges
from evalkit.safetext import visible

__all__ = ["apply_filters", "execute", "new_run_id"]


def new_run_id() -> str:
    """Sortable by time, unique across the processes of a sweep."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def _make(inst: PluginInstance, ctx: RunContext) -> Any:
    return inst.cls(inst.name, inst.config, ctx)


def _imported(scores: ImportedScores, run_id: str) -> pa.Table:
    """The scores a source imported, as judgments of this run."""
    table = scores.table
    if "run_id" in table.schema.names:
        table = table.drop_columns(["run_id"])
    return non_finite_as_errors(conform(table, JUDGMENTS, {
        "run_id": run_id, "origin": "imported", "status": "ok", "plugin": "imported"}))


def apply_filters(table: pa.Table, filters: list[tuple[PluginInstance, Any]],
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


def _versions(rc: RunConfig) -> dict[str, str]:
    """The version of evalkit and of every distribution whose plugin this run used."""
    from importlib.metadata import version

    from evalkit.registry import registry

    out = {"evalkit": version("evalkit")}
    reg = registry()
    for inst in [rc.source, *rc.filters, *rc.judges, *rc.metrics, *rc.sinks,
                 *([rc.generate] if rc.generate is not None else [])]:
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
            print(f"evalkit: sink {inst.name} failed: {visible(mask(str(exc)))}",
                  file=sys.stderr)
            continue
        if report.get("failed"):
            print(f"evalkit: sink {inst.name}: {report['failed']} item(s) failed; see "
                  f"sinks.{inst.name} in {run_dir / 'manifest.json'}", file=sys.stderr)
    return reports


def execute(rc: RunConfig) -> RunResult:
    """Run ``rc`` end to end (or finish the run ``runner.resume`` names); write the run
    directory; print the summary."""
    started = datetime.now(timezone.utc)
    t_start = time.perf_counter()
    run_id = run_id_of(rc) or new_run_id()
    baseline = find_baseline(rc)
    if not is_remote(rc.runner.runs_dir):
        result = _execute(rc, run_id, Path(rc.runner.runs_dir), None, started, t_start)
    else:  # object storage: the run is staged in a local directory, then uploaded
        staged = stage_remote(rc, run_id)
        try:
            result = _execute(rc, run_id, staged.stage, staged, started, t_start)
        finally:
            staged.close()
    check_judge_errors(result.judgment_counts, result.manifest.get("judgment_errors") or {},
                       rc.runner.max_judge_error_rate)
    raise_on_fired(result.alerts, rc.runner.fail_on)
    if baseline is not None:
        check_baseline(rc, baseline, Path(result.run_dir))
    return result


def _execute(rc: RunConfig, run_id: str, runs_dir: Path, staged: Staged | None,
             started: datetime, t_start: float) -> RunResult:
    run_dir = run_dir_of(runs_dir, rc.experiment, run_id)
    cache_dir = Path(rc.runner.cache_dir or os.environ.get("EVALKIT_CACHE_DIR")
                     or Path.home() / ".cache" / "evalkit")
    ctx = RunContext(run_id=run_id, experiment=rc.experiment, run_dir=run_dir,
                     runs_dir=runs_dir, cache_dir=cache_dir, dry_run=rc.runner.dry_run)
    # plugins are built before the run directory exists: a bad path or setting leaves no trace
    source = _make(rc.source, ctx)
    plugins = _Plugins(source=source, shard=runner_cut(source, rc.source_shard),
                       filters=[(i, _make(i, ctx)) for i in rc.filters],
                       judges=[(i, _make(i, ctx)) for i in rc.judges],
                       metrics=[(i, _make(i, ctx)) for i in rc.metrics],
                       sinks=[(i, _make(i, ctx)) for i in rc.sinks],
                       generate=None if rc.generate is None else
                       (rc.generate, _make(rc.generate, ctx)))
    check_metric_references(rc)
    check_alerts(rc.alerts, plugins.metrics, anchored=bool(rc.runner.anchor))
    if rc.runner.anchor:
        read_anchor(rc.runner.anchor, [inst.name for inst in rc.judges])  # before any call
    run = claim(run_dir, run_id, rc)
    finished = False
    try:
        with terminate_as_interrupt():
            result = _run(rc, ctx, plugins, run, started, t_start, staged)
        finished = True
    except KeyboardInterrupt:
        if staged is not None:
            raise RunInterrupted(f"interrupted; run '{run_id}' is marked interrupted in "
                                 f"{staged.url}; finish it with: evalkit run ... --resume "
                                 f"{run_id}") from None
        raise RunInterrupted(f"interrupted; run '{run_id}' is marked interrupted in {run_dir}; "
                             f"finish it with: evalkit run ... --resume {run_id}") from None
    finally:
        run.release(finished)
    return result


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run as Ctrl-C does: it is marked ``interrupted`` (and resumable) by
    the process itself. That is how a scheduler stops a job (``scancel``, ``kill``, a
    container stopped): a run on another machine cannot be told dead from its process id."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class _Plugins:
    source: Any
    filters: list[tuple[PluginInstance, Any]]
    judges: list[tuple[PluginInstance, Any]]
    metrics: list[tuple[PluginInstance, Any]]
    sinks: list[tuple[PluginInstance, Any]]
    shard: tuple[int, int] | None = None  # the shard the runner cuts (not the source)
    generate: tuple[PluginInstance, Any] | None = None  # the candidate side (shadow)


def _run(rc: RunConfig, ctx: RunContext, plugins: _Plugins, run: Claim, started: datetime,
         t_start: float, staged: Staged | None) -> RunResult:
    from evalkit.runner.summary import print_job_line, print_summary

    run_id, run_dir, source = ctx.run_id, ctx.run_dir, plugins.source
    from evalkit.runner.generate import STAGE

    # (a record the source set aside, with another excluded_by, is judged by no judge)
    judged_when_excluded = frozenset({inst.name for inst, _ in plugins.filters} | {STAGE})
    judge_runner = JudgeRunner(plugins.judges, run_id, rc.runner.dry_run,
                               repeats_of(rc, plugins.judges), judged_when_excluded)
    writer = RunWriter(run_dir, run.progress)
    if staged is not None:  # each batch's parts go up once it is judged: a resume keeps them
        writer.on_batch_done = lambda: staged.upload_progress(run_dir)
    timings: dict[str, float] = {}
    manifest: dict[str, Any] = {
        "run_id": run_id, "experiment": rc.experiment, "status": "running",
        "started_at": (run.previous or {}).get("started_at", started.isoformat()),
        "overrides": rc.overrides, "run_dir": str(run_dir) if staged is None else staged.url,
        "config": rc.composed,
        "sweep_id": (rc.sweep or {}).get("id"), "sweep_job": (rc.sweep or {}).get("job"),
    }
    if staged is not None:  # readers anywhere can tell when a killed run's writer ended
        manifest["writer"] = writer_tag(staged.beat_s)
        manifest["heartbeat_at"] = datetime.now(timezone.utc).isoformat()
    if run.previous is not None:
        manifest["resumed"] = [*run.previous.get("resumed", []),
                               {"at": started.isoformat(), "from": run.previous.get("status"),
                                "kept_batches": writer.kept_batches}]
    writer.write_manifest(manifest)
    if staged is not None:
        staged.publish(run_dir, manifest_only=True)
        staged.start_heartbeat(manifest)
    point("run_started")
    judging = Judging(judge_runner, writer, source)
    generating = None if plugins.generate is None else Generating(
        *plugins.generate, lambda t: apply_filters(t, plugins.filters, timings),
        rc.runner.dry_run)
    n_excluded: dict[str, int] = {}
    reject_rows: list[dict[str, Any]] = []
    imported: list[pa.Table] = []  # the scores of the next batch's records
    batches = 0
    try:
        t0 = time.perf_counter()
        items = limited(sharded(source.read(), plugins.shard), rc.source_limit)
        # small batches (a file each) gathered up to the source's batch size: what it
        # would give from one file
        size = min(rc.runner.batch_size,
                   getattr(getattr(source, "config", None), "batch_size", None) or 1 << 62)
        for item in coalesced(items, size, run_id):
            if isinstance(item, Reject):
                reject_rows.append({"run_id": run_id, "source": rc.source.name,
                                    "location": item.location, "reason": item.reason,
                                    "raw": item.raw})
                continue
            if isinstance(item, ImportedScores):
                if item.table.num_rows:
                    imported.append(_imported(item, run_id))
                continue
            point("batch_read")
            timings["read"] = timings.get("read", 0.0) + time.perf_counter() - t0
            table = item  # (conformed by coalesced)
            if "warnings" not in manifest:  # the first batch: mistakes that look like data
                manifest["warnings"] = unmatched_fields(rc.source, table)
                warn(manifest["warnings"])
            table = apply_filters(table, plugins.filters, timings)
            if generating is not None:  # the candidates, beside their recorded records
                table = generating.extend(table)
            vc = pc.value_counts(one_array(table.column("excluded_by")))
            for count in vc.to_pylist():
                if count["values"] is not None:
                    n_excluded[count["values"]] = n_excluded.get(count["values"], 0) + \
                        count["counts"]
            t1 = time.perf_counter()
            writer.add_records(table)
            timings["write"] = timings.get("write", 0.0) + time.perf_counter() - t1
            if batches < writer.kept_batches:  # judged before the run stopped: parts kept
                writer.check_kept(batches, table.column("record_id"))
            else:
                judging.submit(table, imported)
            imported = []
            batches += 1
            t0 = time.perf_counter()
        judging.finish()
        for part in imported:
            writer.add_judgments(part)
        writer.finish_records()
        timings.update(judge_runner.timings)

        t0 = time.perf_counter()
        # a run without metrics never starts DuckDB
        metric_tables = compute_metrics(plugins.metrics, ctx, timings) if rc.metrics else []
        if rc.runner.anchor and not rc.runner.dry_run:
            metric_tables.append(conform(anchor_rows(rc, plugins.judges, run_id, run_dir),
                                         METRICS, {"run_id": run_id}))
        metrics = pa.concat_tables(metric_tables) if metric_tables else METRICS.empty_table()
        metrics = writer.write_table("metrics", metrics)
        point("metrics_written")
        alerts = writer.write_table("alerts", evaluate_alerts(rc, metrics, run_id))
        rejects = writer.write_table("rejects", reject_rows)
        timings["metrics"] = time.perf_counter() - t0
        point("run_finishing")
    except BaseException as exc:
        judging.close()  # (before the files it would write to go)
        writer.abort()
        interrupted = isinstance(exc, KeyboardInterrupt)
        manifest.update(status="interrupted" if interrupted else "failed",
                        error=None if interrupted else f"{type(exc).__name__}: {exc}",
                        finished_at=datetime.now(timezone.utc).isoformat(),
                        duration_s=time.perf_counter() - t_start)
        with contextlib.suppress(RunDirError):  # (a full disk must not hide the first error)
            writer.write_manifest(manifest)
            if staged is not None:  # what it wrote, and why it stopped
                staged.publish(run_dir, stopped=True)
        raise
    finally:
        judging.close()
        for _, plugin in plugins.judges:
            plugin.close()
        if generating is not None:
            generating.close()
    endpoints: dict[str, dict[str, Any]] = {}
    for _, plugin in plugins.judges:
        endpoints.update(plugin.endpoint_stats())
    if generating is not None:  # the candidate's model: an endpoint with limits too
        for endpoint, stats in generating.plugin.endpoint_stats().items():
            endpoints[endpoint] = merge_endpoint_stats(endpoints.get(endpoint), stats)

    counts: dict[str, dict[str, int]] = {}
    for (judge, status), (n, _c, _u) in sorted(writer.judgment_stats.items()):
        counts.setdefault(judge, {})[status] = n
    cost, unpriced = writer.judge_spend()
    versions = _versions(rc)
    manifest.update(
        # a dry run made no judge call: its directory must not pass for a real run's
        status="dry_run" if rc.runner.dry_run else "ok",
        finished_at=datetime.now(timezone.utc).isoformat(),
        duration_s=round(time.perf_counter() - t_start, 4),
        n_records=writer.n_records,
        n_excluded=sum(n_excluded.values()),
        n_rejects=len(reject_rows),
        n_judgments=writer.n_judgments,
        judge_cost_usd=cost,
        judge_calls_unpriced=unpriced,
        excluded_by=n_excluded,
        judgments=counts,
        judgment_errors=writer.error_causes,  # judge -> error cause -> count
        judgments_cached=dict(sorted(writer.judgments_cached.items())),
        # endpoint -> the rate and calls in flight its limits settled at, refusals
        endpoints=dict(sorted(endpoints.items())),
        dry_run=rc.runner.dry_run,
        offline_judges=sorted(offline_judges(rc)),
        dry_run_estimates=judge_runner.estimates if rc.runner.dry_run else None,
        evalkit_version=versions["evalkit"],
        versions=versions,
        sources={rc.source.name: source.fingerprint()},
        timings={k: round(v, 4) for k, v in timings.items()},
    )
    if generating is not None:  # the candidate side: replayed, generated, failed, spend
        manifest["generate"] = generating.manifest()
    writer.forget_progress()
    writer.write_manifest(manifest)
    if plugins.sinks and not rc.runner.dry_run:
        manifest["sinks"] = _push(plugins.sinks, run_dir)
        writer.write_manifest(manifest)
    if staged is not None:
        staged.publish(run_dir)
    result = RunResult(run_id, run_dir if staged is None else staged.url, manifest, metrics,
                       alerts, counts)
    if rc.runner.summary and rc.sweep:  # the sweep's closing table has the rest
        print_job_line(rc, result)
    elif rc.runner.summary:
        print_summary(rc, result, rejects)
    if rc.runner.report and not rc.runner.dry_run:
        from evalkit.report import write_report

        try:
            page = write_report([run_dir]).html
        except OSError as exc:  # (the run itself is saved: say so, in one line)
            from evalkit.errors import disk_error

            raise RunDirError(f"{disk_error('runner.report', exc)} (the run is saved in "
                              f"{run_dir}; write its report with: evalkit report "
                              f"{run_dir})") from exc
        if not rc.sweep:  # (a sweep's page is printed once, at its end)
            print(f"report: {page}")
    return result
