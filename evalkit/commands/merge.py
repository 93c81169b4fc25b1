"""``evalkit merge RUN...``: the shards of one logical run (``source.shard=i/n``) as one run.
Its records, judgments (every repeat of ``runner.repeats`` too) and rejects are the shards'
own, under the merged run's id, and its
metrics and alerts are computed again over the merged tables by the same metric plugins
and config: never an average of per-shard figures (a rate's interval, a percentile or a
kappa do not average). The merged run is written beside the shards in a hidden directory
and renamed into place when complete; its manifest names the shards (``merged_from``) and
carries their source fingerprints as one (``sources``: the window they split, complete when
every shard's read was), so an incremental read continues after the merged run."""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import shutil
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, EvalkitError
from evalkit.results.names import check_name, run_dir_of

__all__ = ["add_arguments", "main", "merge", "merged_sources"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help="the shard runs (ids or run directories): "
                        "every shard 0/n..n-1/n of one config, each once")
    parser.add_argument("--runs-dir", default="runs", help="where run ids are looked up and "
                        "the merged run is written (default: runs)")


def _shard(manifest: dict[str, Any], run_dir: Path) -> tuple[int, int]:
    """The run's ``source.shard`` as ``(i, n)``; a one-line error for a run that is none."""
    from evalkit.runner.shard import parse_shard

    config = manifest.get("config")
    source = config.get("source") if isinstance(config, dict) else None
    shard = source.get("shard") if isinstance(source, dict) else None
    if shard is None:
        raise ConfigError(f"merge: run {run_dir} is not a shard (no source.shard); merge the "
                          "runs of one `-m source.shard=0/n,...` sweep")
    try:
        parsed = parse_shard(shard)
    except ConfigError as exc:
        raise ConfigError(f"merge: run {run_dir}: {exc}") from None
    assert parsed is not None
    return parsed


def _in_shard_order(manifests: list[dict[str, Any]],
                    dirs: list[Path]) -> list[tuple[dict[str, Any], Path]]:
    """The runs by shard index (0/12, 1/12, ..., 10/12: by number, not as text)."""
    pairs = list(zip(manifests, dirs, strict=True))
    return sorted(pairs, key=lambda p: _shard(*p))


def _check(manifests: list[dict[str, Any]], dirs: list[Path]) -> int:
    """The shard count, once the runs are known to be every shard of one config."""
    shards = []
    for m, d in zip(manifests, dirs, strict=True):
        if m.get("status") != "ok":
            raise ConfigError(f"merge: run {d} has status '{m.get('status')}'; merge finished "
                              "runs only (re-run the failed shard)")
        shards.append(_shard(m, d))
    counts = {n for _, n in shards}
    if len(counts) != 1:
        raise ConfigError(f"merge: the runs split into different shard counts {sorted(counts)}")
    n = counts.pop()
    seen = sorted(i for i, _ in shards)
    if seen != list(range(n)):
        missing = sorted(set(range(n)) - set(seen))
        twice = sorted({i for i in seen if seen.count(i) > 1})
        raise ConfigError(f"merge: shards of {n} must each come once; missing {missing}, "
                          f"twice {twice}")

    def unsharded(m: dict[str, Any]) -> dict[str, Any]:
        config = copy.deepcopy(m["config"])
        config["source"].pop("shard", None)
        config.get("runner", {}).pop("run_id", None)
        return config
    first = unsharded(manifests[0])
    for m, d in zip(manifests[1:], dirs[1:], strict=True):
        if unsharded(m) != first or m.get("experiment") != manifests[0].get("experiment"):
            raise ConfigError(f"merge: run {d} has another config than {dirs[0]} (beyond "
                              "source.shard); merge shards of one config only")
    return n


def merged_sources(manifests: list[dict[str, Any]], dirs: list[Path]) -> dict[str, Any]:
    """The shards' source fingerprints as the merged run's: each shard's own part (``shard``)
    dropped, ``complete`` when every shard's read was, numeric ``stats`` summed. Shards that
    read a source in different windows (an incremental sweep that a run landing between its
    shards moved) are refused: together they are not one window."""
    out: dict[str, Any] = {}
    for name, first in (manifests[0].get("sources") or {}).items():
        fps = [((m.get("sources") or {}).get(name) or {}) for m in manifests]
        if not isinstance(first, dict):
            continue
        for fp, d in zip(fps[1:], dirs[1:], strict=True):
            if fp.get("window") != first.get("window"):
                raise ConfigError(
                    f"merge: run {d} read source '{name}' in the window {fp.get('window')}, "
                    f"run {dirs[0]} in {first.get('window')}; merge the shards of one window "
                    "(run the sweep again with a fixed source.from_time and source.to_time)")
        fp = {k: v for k, v in first.items() if k != "shard"}
        if "complete" in first:
            fp["complete"] = all(f.get("complete") for f in fps)
        if "resumed" in first:
            fp["resumed"] = any(f.get("resumed") for f in fps)
        if isinstance(first.get("stats"), dict):
            stats: dict[str, Any] = {}
            for f in fps:
                for k, v in (f.get("stats") or {}).items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        stats[k] = stats.get(k, 0) + v
            fp["stats"] = stats
        out[name] = fp
    return out


def _set_run_id(table: Any, run_id: str) -> Any:
    import pyarrow as pa

    idx = table.schema.get_field_index("run_id")
    return table.set_column(idx, "run_id", pa.array([run_id] * table.num_rows, pa.string()))


def merge(dirs: list[Path], runs_dir: Path) -> Path:
    """Write the merged run; its directory."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf

    from evalkit import config as config_mod
    from evalkit._faults import point
    from evalkit.context import RunContext
    from evalkit.results.runfiles import RunFileError, check_run_tables, load_manifest
    from evalkit.results.schemas import METRICS, TABLES
    from evalkit.results.writer import RunWriter
    from evalkit.runner.alerts import evaluate_alerts
    from evalkit.runner.app import register_resolvers
    from evalkit.runner.metrics import compute_metrics
    from evalkit.runner.run import _make, new_run_id

    try:
        manifests = [load_manifest(d) for d in dirs]
        for d in dirs:
            check_run_tables(d)
    except RunFileError as exc:
        raise ConfigError(f"merge: {exc}") from None
    n = _check(manifests, dirs)
    ordered = _in_shard_order(manifests, dirs)
    manifests, dirs = [m for m, _ in ordered], [d for _, d in ordered]
    sources = merged_sources(manifests, dirs)
    config = copy.deepcopy(manifests[0]["config"])
    config["source"].pop("shard", None)
    register_resolvers()
    rc = config_mod.load(OmegaConf.create(config), [])
    run_id = new_run_id()
    # (the experiment comes from the shards' manifests: a name, checked, never a path)
    experiment = check_name(manifests[0].get("experiment"),
                            f"merge: {dirs[0] / 'manifest.json'}: experiment",
                            "experiment name", "a shard written by evalkit run")
    final = run_dir_of(runs_dir, experiment, run_id)
    _refuse_merged_again(final.parent, [str(m.get("run_id")) for m in manifests])
    # hidden (never read as a run) and named by this process, so a merge killed before its
    # rename leaves nothing a reader takes, and the next merge clears what it left
    work = final.parent / f".merge-{run_id}-{os.getpid()}"
    started = datetime.now(timezone.utc)
    writer = RunWriter(work)
    try:
        rejects = []
        for d in dirs:
            for batch in pq.ParquetFile(d / "records.parquet").iter_batches(65536):
                writer.add_records(_set_run_id(pa.Table.from_batches([batch]), run_id))
            for part in sorted((d / "judgments").glob("part-*.parquet")):
                writer.add_judgments(_set_run_id(pq.read_table(part), run_id))
            # the extra judgments of runner.repeats, each kept (repeatability reads them)
            for part in sorted((d / "judgments").glob("repeat-*.parquet")):
                writer.add_repeats(_set_run_id(pq.read_table(part), run_id))
            if (d / "rejects.parquet").exists():
                rejects.append(_set_run_id(pq.read_table(d / "rejects.parquet"), run_id))
        point("merge_records")
        writer.finish_records()
        ctx = RunContext(run_id=run_id, experiment=experiment, run_dir=work,
                         runs_dir=runs_dir, cache_dir=work / ".cache", dry_run=False)
        timings: dict[str, float] = {}
        tables = compute_metrics([(i, _make(i, ctx)) for i in rc.metrics], ctx, timings) \
            if rc.metrics else []
        metrics = writer.write_table("metrics", pa.concat_tables(tables) if tables
                                     else METRICS.empty_table())
        writer.write_table("alerts", evaluate_alerts(rc, metrics, run_id))
        writer.write_table("rejects", pa.concat_tables(rejects) if rejects
                           else TABLES["rejects"].empty_table())
        counts: dict[str, dict[str, int]] = {}
        for (judge, status), (k, _c, _u) in sorted(writer.judgment_stats.items()):
            counts.setdefault(judge, {})[status] = k
        cost, _unpriced = writer.judge_spend()
        first = manifests[0]
        writer.write_manifest({
            **{k: first.get(k) for k in ("evalkit_version", "versions", "overrides")},
            "run_id": run_id, "experiment": experiment, "status": "ok",
            "started_at": started.isoformat(),
            "finished_at": datetime.now(timezone.utc).isoformat(),
            "duration_s": sum(m.get("duration_s") or 0 for m in manifests),
            "run_dir": str(final), "config": config,
            "sweep_id": None, "sweep_job": None,
            "merged_from": [m["run_id"] for m in manifests], "shards": n,
            "sources": sources,
            "n_records": writer.n_records,
            "n_excluded": sum(m.get("n_excluded") or 0 for m in manifests),
            "n_rejects": sum(m.get("n_rejects") or 0 for m in manifests),
            "n_judgments": writer.n_judgments, "judge_cost_usd": cost,
            "judge_calls_unpriced": sum(m.get("judge_calls_unpriced") or 0 for m in manifests),
            "judgments": counts, "dry_run": False,
            "timings": {k: round(v, 4) for k, v in timings.items()},
        })
        shutil.rmtree(work / ".cache", ignore_errors=True)
        point("merge_written")
        os.replace(work, final)
        point("merge_renamed")
    except BaseException:
        writer.abort()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


def _refuse_merged_again(experiment_dir: Path, shard_ids: list[str]) -> None:
    """Clear what killed merges left (``.merge-*`` of a process that is gone), and refuse to
    merge shards a finished run already merges: two merged runs of the same shards would
    count their records twice."""
    from evalkit.results.runs import pid_gone, read_manifest, run_manifests

    for left in experiment_dir.glob(".merge-*"):
        pid = left.name.rpartition("-")[2]
        if pid.isdigit() and pid_gone(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    for path in run_manifests(experiment_dir.parent):
        if path.parent.parent != experiment_dir:
            continue
        m = read_manifest(path.parent) or {}
        if m.get("status") == "ok" and sorted(map(str, m.get("merged_from") or [])) == \
                sorted(shard_ids):
            raise ConfigError(f"merge: these shards are already merged into {path.parent}; "
                              "use that run, or delete it to merge them again")


@contextlib.contextmanager
def _held(dirs: list[Path]) -> Iterator[None]:
    """A shared ``flock`` on each shard's directory while it is read: ``evalkit compact``
    (which takes it exclusively) leaves those runs alone meanwhile, and a merge started
    during a compaction waits for its swap."""
    import fcntl

    with contextlib.ExitStack() as stack:
        for d in dirs:
            fd = os.open(d, os.O_RDONLY)
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield


def main(args: argparse.Namespace) -> int:
    from evalkit.commands._remote import runs_at

    try:
        # shards on object storage are copied to a private directory, merged there, and the
        # merged run uploaded whole, its manifest last (commands/_remote.py)
        with runs_at(args.runs_dir, "merge") as runs:
            dirs = [runs.find(ref) for ref in args.runs]
            with _held(dirs):
                out = merge(dirs, runs.path)
            where = runs.publish_run(out)
    except EvalkitError as exc:
        from evalkit.redact import mask
        from evalkit.safetext import visible

        print(f"evalkit: error: {visible(mask(str(exc)), newlines=True)}", file=sys.stderr)
        return exc.exit_code
    print(f"merged {len(dirs)} shards into {where}/")
    return 0
