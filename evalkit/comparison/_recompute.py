"""Recomputing two runs' metrics over the same multiset of records: the engine of the paired
bootstrap. Nothing is written: the runs are read-only here, and a metric that writes side
files (``disagreements``) writes them to a temporary directory.

Each resample replaces the connection's tables, and a metric must see only the resample it
is given: caches of derived tables (``metrics._judged``) are keyed by the catalog versions of
the tables they read, and :meth:`RunTables.use` checks that every resample gets new
versions."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.errors import EvalkitError

Key = tuple[str, str]  # (metric row name, slice)


class RunTables:
    """One run opened for recomputation over a chosen multiset of its records."""

    def __init__(self, run_dir: Path, scratch: Path) -> None:
        import duckdb

        from evalkit.results.writer import judgments_view_sql

        self.run_dir = run_dir
        from evalkit.results.runfiles import load_manifest

        self.manifest = load_manifest(run_dir)
        if self.manifest.get("status") != "ok":
            raise EvalkitError(f"compare: run {run_dir} has status "
                               f"'{self.manifest.get('status')}', not ok; compare finished runs")
        self.con = duckdb.connect()
        records = str(run_dir / "records.parquet").replace("'", "''")
        self.con.execute(f"CREATE TABLE base_records AS SELECT * FROM read_parquet('{records}')")
        self.con.execute(f"CREATE TABLE base_judgments AS {judgments_view_sql(run_dir)}")
        self.con.execute("CREATE TABLE base_repeats AS "
                         f"{judgments_view_sql(run_dir, 'repeat')}")
        self.ids = {r for (r,) in self.con.execute(
            "SELECT record_id FROM base_records").fetchall()}
        if len(self.ids) < 50_000:
            # each resample runs many small queries: thread start-up costs more than it saves
            self.con.execute("SET threads = 1")
        self.scratch = scratch
        self.plugin_of: dict[str, str] = {}  # metric instance -> its plugin name

    def metrics(self, inner_ci: bool = False, only: list[str] | None = None
                ) -> dict[str, Any]:
        """Instance name -> metric plugin built from the run's own config (those named in
        ``only``, when given), its own interval off (``inner_ci``: on, as the run computed
        it)."""
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
            if spec is None or (only and name not in only):
                continue
            inst = instance("metrics", name, spec, f"metrics.{name}")
            self.plugin_of[name] = inst.plugin
            config = inst.config
            keys = {f.name for f in dataclasses.fields(config)}
            if "n_boot" in keys and not inner_ci:
                config = dataclasses.replace(config, n_boot=0)
            if legacy_flag_at and "flag_at" in keys and "flag_at" not in spec:
                config = dataclasses.replace(config, flag_at=legacy_flag_at)
            out[name] = inst.cls(name, config, ctx)
        return out

    def use(self, sample: Any) -> None:
        """Make the tables ``records``, ``judgments``, ``repeats`` and the view ``included``
        hold the records of ``sample`` (a table of record_id, copy), each copy under its own
        id.
        Raises when the catalog versions of the tables did not all change: a cache keyed by
        them could then hand this resample a table computed from another."""
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
        self.con.execute(
            "CREATE OR REPLACE TABLE repeats AS SELECT j.* REPLACE "
            "(j.record_id || '#' || s.copy AS record_id) FROM base_repeats j "
            "JOIN sample s USING (record_id)")
        self.con.execute("CREATE OR REPLACE VIEW included AS "
                         "SELECT * FROM records WHERE excluded_by IS NULL")
        self.con.unregister("sample")
        kept = before & set(table_versions(self.con))
        if kept:
            raise RuntimeError(f"compare: the resample kept the tables {sorted(kept)} of "
                               "the previous one; metric caches would mix resamples")


@dataclasses.dataclass
class Row:
    """A metric row computed on a run: value, and what the metric said of it."""

    value: float | None
    owner: str  # the metric instance that wrote it
    plugin: str
    higher_is_better: bool | None
    n: int | None = None  # the records behind the value (the row's n_judged)


def values(run: RunTables, metrics: dict[str, Any], failed: dict[str, str] | None = None,
           ) -> dict[Key, Row]:
    """Each metric row of ``metrics`` on ``run``'s current tables, keyed (metric, slice). On
    a resample (``failed`` given), a metric that raises leaves its rows out and its first
    error in ``failed``: that metric cannot be resampled, and the comparison says so."""
    from evalkit.results.schemas import METRICS, conform

    out: dict[Key, Row] = {}
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
        hib = getattr(plugin, "higher_is_better", None)
        kind = run.plugin_of.get(name, "")
        for row in table.select(["metric", "slice", "value", "higher_is_better",
                                 "n_judged"]).to_pylist():
            better = row["higher_is_better"] if row["higher_is_better"] is not None else hib
            out[(row["metric"], row["slice"])] = Row(row["value"], name, kind, better,
                                                     row["n_judged"])
    return out


def draws(n: int, count: int, seed: int, round_: int, cells: int = 2_000_000
          ) -> Iterator[np.ndarray]:
    """``count`` resamples of ``n`` indices (with replacement) for extension ``round_`` of a
    comparison seeded ``seed``, in blocks of at most ``cells`` indices: each round draws from
    its own stream, so extending a comparison never repeats the resamples it has."""
    rng = np.random.default_rng([seed, round_])
    block = max(1, min(count, cells // max(n, 1)))
    for start in range(0, count, block):
        yield rng.integers(0, n, size=(min(block, count - start), n))


def samples(ids: list[str], count: int, seed: int, round_: int) -> Iterator[Any]:
    """Each resample of the sorted shared ``ids`` as a table (record_id, copy): the k-th draw
    of a record becomes copy k, so copies keep distinct ids. Sorted ids make the draws a
    function of the set of records, not of the order the runs wrote them in."""
    import pyarrow as pa

    arr = np.array(ids, dtype=object)
    for block in draws(len(ids), count, seed, round_):
        for picked in np.sort(block, axis=1):
            same = np.r_[False, picked[1:] == picked[:-1]]
            run_start = np.flatnonzero(~same)
            lengths = np.diff(np.r_[run_start, len(picked)])
            copy = np.arange(len(picked)) - np.repeat(run_start, lengths)
            yield pa.table({"record_id": pa.array(arr[picked].tolist(), pa.string()),
                            "copy": pa.array(copy, pa.int64())})


def identity(ids: list[str]) -> Any:
    """The sample of every shared record once."""
    import pyarrow as pa

    return pa.table({"record_id": pa.array(ids, pa.string()),
                     "copy": pa.array([0] * len(ids), pa.int64())})
