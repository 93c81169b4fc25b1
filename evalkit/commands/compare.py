"""``evalkit compare RUN_A RUN_B``: how every metric moved between two runs, over the records
both runs share, with paired-bootstrap confidence intervals of the differences.

Each resample draws the shared records with replacement, once for both runs (that pairing is
what makes the interval honest when the runs score the same inputs), and recomputes every
metric both runs configured, with its own config (inner bootstrap off), on both runs' tables.
A difference is flagged significant when its interval excludes 0. Nothing is written: the
runs are read-only here, and a metric that writes side files (``disagreements``) writes them
to a temporary directory.

Each resample replaces the connection's tables, and a metric must see only the resample it is
given: caches of derived tables (``metrics._judged``) are keyed by the catalog versions of the
tables they read, and :meth:`_Run.use` checks that every resample gets new versions. A metric
that is undefined on some resamples (no record of a slice drawn, no success to divide by) has
no interval of its difference: the row says so (``note``) instead."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.commands._output import add_format_arguments, chosen_format, emit, number
from evalkit.commands._runs import find_run, local_runs_dir
from evalkit.errors import EvalkitError

__all__ = ["MAX_UNDEFINED", "add_arguments", "compare", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", help="the baseline: a run id or a run directory")
    parser.add_argument("run_b", help="the candidate: a run id or a run directory")
    parser.add_argument("--runs-dir", default="runs", help="where run ids are looked up "
                        "(default: runs)")
    parser.add_argument("--n-boot", type=int, default=200,
                        help="paired bootstrap resamples (default: 200; each recomputes every "
                        "metric on both runs)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="CI level (default: 0.95)")
    parser.add_argument("--metric", action="append", default=None,
                        help="only this metric instance (repeatable)")
    add_format_arguments(parser)


class _Run:
    """One run opened for recomputation over a chosen multiset of its records."""

    def __init__(self, run_dir: Path, scratch: Path) -> None:
        import duckdb

        from evalkit.results.writer import judgments_view_sql

        self.manifest = json.loads((run_dir / "manifest.json").read_text())
        if self.manifest.get("status") != "ok":
            raise EvalkitError(f"compare: run {run_dir} has status "
                               f"'{self.manifest.get('status')}', not ok; compare finished runs")
        self.con = duckdb.connect()
        records = str(run_dir / "records.parquet").replace("'", "''")
        self.con.execute(f"CREATE TABLE base_records AS SELECT * FROM read_parquet('{records}')")
        self.con.execute(f"CREATE TABLE base_judgments AS {judgments_view_sql(run_dir)}")
        self.ids = {r for (r,) in self.con.execute(
            "SELECT record_id FROM base_records").fetchall()}
        if len(self.ids) < 50_000:
            # each resample runs many small queries: thread start-up costs more than it saves
            self.con.execute("SET threads = 1")
        self.scratch = scratch

    def metrics(self) -> dict[str, Any]:
        """Instance name -> metric plugin built from the run's own config, inner CI off."""
        from evalkit.config import instance
        from evalkit.context import RunContext

        config_node = self.manifest.get("config") or {}
        node = config_node.get("metrics") or {}
        # a run from before the flag_at setting counted a score at its threshold as flagged
        legacy_flag_at = None if "flag_at" in config_node else ">="
        ctx = RunContext(run_id=self.manifest["run_id"], experiment=self.manifest.get(
            "experiment", "default"), run_dir=self.scratch / self.manifest["run_id"],
            runs_dir=self.scratch, cache_dir=self.scratch)
        out = {}
        for name, spec in node.items():
            if spec is None:
                continue
            inst = instance("metrics", name, spec, f"metrics.{name}")
            config = inst.config
            keys = {f.name for f in dataclasses.fields(config)}
            if "n_boot" in keys:
                config = dataclasses.replace(config, n_boot=0)
            if legacy_flag_at and "flag_at" in keys and "flag_at" not in spec:
                config = dataclasses.replace(config, flag_at=legacy_flag_at)
            out[name] = inst.cls(name, config, ctx)
        return out

    def use(self, sample: Any) -> None:
        """Make the views ``records``, ``judgments`` and ``included`` hold the records of
        ``sample`` (a table of record_id, copy), each copy under its own id. Raises when the
        catalog versions of the tables did not all change: a cache keyed by them could then
        hand this resample a table computed from another."""
        from evalkit.metrics._judged import table_versions

        before = set(table_versions(self.con))
        self.con.register("sample", sample)
        # materialised once per resample: every metric then reads plain tables
        self.con.execute(
            "CREATE OR REPLACE TABLE records AS SELECT r.* REPLACE "
            "(r.record_id || '#' || s.copy AS record_id) FROM base_records r "
            "JOIN sample s USING (record_id)")
        self.con.execute(
            "CREATE OR REPLACE TABLE judgments AS SELECT j.* REPLACE "
            "(j.record_id || '#' || s.copy AS record_id) FROM base_judgments j "
            "JOIN sample s USING (record_id)")
        self.con.execute("CREATE OR REPLACE VIEW included AS "
                         "SELECT * FROM records WHERE excluded_by IS NULL")
        self.con.unregister("sample")
        kept = before & set(table_versions(self.con))
        if kept:
            raise RuntimeError(f"compare: the resample kept the tables {sorted(kept)} of "
                               "the previous one; metric caches would mix resamples")


def _values(run: _Run, metrics: dict[str, Any], owner: dict[tuple[str, str], str],
            failed: dict[str, str] | None = None) -> dict[tuple[str, str], float | None]:
    """Each metric row's value, keyed (metric, slice); ``owner`` learns which instance wrote
    each row. On a resample (``failed`` given), a metric that raises leaves its rows out and
    its first error in ``failed``: that metric cannot be resampled, and compare says so."""
    from evalkit.results.schemas import METRICS, conform

    out: dict[tuple[str, str], float | None] = {}
    for name, plugin in metrics.items():
        if failed is not None and name in failed:
            continue
        try:
            table = conform(plugin.compute(run.con), METRICS, {"metric": name})
        except Exception as exc:  # a plugin's own failure on an unusual resample
            if failed is None:
                raise
            failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            continue
        for row in table.select(["metric", "slice", "value"]).to_pylist():
            out[(row["metric"], row["slice"])] = row["value"]
            owner.setdefault((row["metric"], row["slice"]), name)
    return out


def _samples(ids: list[str], n_boot: int, seed: int) -> Iterator[Any]:
    import numpy as np
    import pyarrow as pa

    from evalkit.metrics._stats import resample_indices

    arr = np.array(ids, dtype=object)
    for picked in (np.sort(row) for block in resample_indices(len(ids), n_boot, seed)
                   for row in block):
        # the k-th draw of the same record becomes copy k, so copies keep distinct ids
        same = np.r_[False, picked[1:] == picked[:-1]]
        run_start = np.flatnonzero(~same)
        lengths = np.diff(np.r_[run_start, len(picked)])
        copy = np.arange(len(picked)) - np.repeat(run_start, lengths)
        yield pa.table({"record_id": pa.array(arr[picked].tolist(), pa.string()),
                        "copy": pa.array(copy, pa.int64())})


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def compare(run_a: Path, run_b: Path, n_boot: int = 200, seed: int = 0,
            confidence: float = 0.95, only: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per (metric, slice) both runs produce: values on the shared records, the
    difference B − A, its paired-bootstrap interval and whether that excludes 0."""
    import numpy as np
    import pyarrow as pa

    from evalkit.metrics._stats import percentile_interval

    with tempfile.TemporaryDirectory(prefix="evalkit-compare-") as tmp:
        a, b = _Run(run_a, Path(tmp) / "a"), _Run(run_b, Path(tmp) / "b")
        shared = sorted(a.ids & b.ids)
        if not shared:
            raise EvalkitError(f"compare: runs {run_a.name} and {run_b.name} share no "
                               "record_id; a paired comparison needs the same inputs")
        ma, mb = a.metrics(), b.metrics()
        names = [n for n in ma if n in mb and (not only or n in only)]
        if not names:
            raise EvalkitError("compare: the runs configure no metric in common"
                               + (f" among {only}" if only else ""))
        ma = {n: ma[n] for n in names}
        mb = {n: mb[n] for n in names}
        identity = pa.table({"record_id": pa.array(shared, pa.string()),
                             "copy": pa.array([0] * len(shared), pa.int64())})
        a.use(identity)
        b.use(identity)
        owner: dict[tuple[str, str], str] = {}
        failed: dict[str, str] = {}
        va, vb = _values(a, ma, owner), _values(b, mb, owner)
        keys = [k for k in va if k in vb]
        deltas: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
        for sample in _samples(shared, n_boot, seed):
            a.use(sample)
            b.use(sample)
            sa, sb = _values(a, ma, owner, failed), _values(b, mb, owner, failed)
            for k in keys:
                x, y = sa.get(k), sb.get(k)
                if _finite(x) and _finite(y):
                    deltas[k].append(y - x)  # type: ignore[operator]
    alpha = (1.0 - confidence) / 2
    rows = []
    for key in keys:
        x, y = va[key], vb[key]
        row: dict[str, Any] = {"metric": key[0], "slice": key[1], "a": x, "b": y,
                               "delta": y - x if _finite(x) and _finite(y) else None,
                               "ci_low": None, "ci_high": None, "significant": None,
                               "n_shared": len(shared), "n_resamples": len(deltas[key]),
                               "note": None}
        undefined = n_boot - len(deltas[key])
        if row["delta"] is None:
            row["note"] = "no difference: the metric is undefined or infinite in a run"
        elif n_boot < 2:
            row["note"] = "no interval: fewer than 2 resamples (--n-boot)"
        elif owner.get(key) in failed:
            row["note"] = (f"not resampled: metric '{owner[key]}' failed on a resample "
                           f"({failed[owner[key]]}); no interval")
        elif undefined > MAX_UNDEFINED * n_boot:
            row["note"] = (f"not resampled: undefined on {undefined} of {n_boot} resamples "
                           "(a resample without the records it needs); no interval")
        else:
            lo, hi = percentile_interval(np.array(deltas[key]), alpha)
            row.update(ci_low=lo, ci_high=hi, significant=bool(lo > 0 or hi < 0))
        rows.append(row)
    return rows


MAX_UNDEFINED = 0.01
"""The share of resamples on which a metric may be undefined and still get an interval: the
percentile interval of the resamples where it is defined is the interval of another
statistic (the metric given that it is defined) once that share is not negligible."""


def main(args: argparse.Namespace) -> int:
    runs_dir = local_runs_dir(args.runs_dir, "compare")
    if args.n_boot < 0:
        raise EvalkitError("compare: --n-boot must be 0 or more")
    if not 0.0 < args.confidence < 1.0:
        raise EvalkitError("compare: --confidence must be within (0, 1)")
    run_a = find_run(args.run_a, runs_dir, "compare", unfinished=True)
    run_b = find_run(args.run_b, runs_dir, "compare", unfinished=True)
    rows = compare(run_a, run_b, args.n_boot, args.seed, args.confidence, args.metric)
    fmt = chosen_format(args.format, args.out)
    if fmt in ("table", "vertical"):
        _print(rows, run_a, run_b, args.confidence, fmt, args.out)
    else:
        columns = list(rows[0]) if rows else ["metric"]
        emit(columns, [tuple(r.values()) for r in rows], fmt, args.out,
             csv_formulas=args.csv_formulas)
    return 0


def _print(rows: list[dict[str, Any]], run_a: Path, run_b: Path, confidence: float,
           fmt: str, out: str | None) -> None:
    def fmt_ci(r: dict[str, Any]) -> str:
        if r["ci_low"] is None:
            return r["note"] or ""
        return f"[{number(r['ci_low'])}, {number(r['ci_high'])}]"

    table = [(r["metric"], r["slice"], r["a"], r["b"], r["delta"], fmt_ci(r),
              {True: "yes", False: "no", None: ""}[r["significant"]]) for r in rows]
    n = rows[0]["n_shared"] if rows else 0
    note = (f"A = {run_a.name}, B = {run_b.name}: {len(rows)} metric rows over {n} shared "
            "records; significant: the paired bootstrap interval of B − A excludes 0")
    emit(["metric", "slice", "A", "B", "B − A", f"{confidence:.0%} CI", "significant"], table,
         fmt, out, note=note)
