"""The extra judgments of ``runner.repeats`` survive the commands that rewrite runs: the
merged shards (``evalkit merge``) hold the unsharded run's repeats, judgments and metrics
(the repeatability metric's included), and a compacted run (``evalkit compact``) its own."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import evalkit
from evalkit.commands.merge import merge

OVERRIDES = ["runner.repeats=3", "runner.judge_repeats={refusal: 2}",
             "+metrics.rep={plugin: repeatability, judge: prompt_echo}"]
JUDGMENT = ["record_id", "judge", "repeat", "status", "value", "passed", "label"]
METRIC = ["metric", "slice", "value", "ci_low", "ci_high", "n_judged"]


def _rows(run_dir: Path, pattern: str, cols: list[str]) -> list[tuple]:
    parts = sorted((run_dir / "judgments").glob(pattern))
    return sorted(tuple(r[c] for c in cols) for p in parts
                  for r in pq.read_table(p, columns=cols).to_pylist())


def test_merged_shards_keep_every_repeat(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    whole = evalkit.run("quickstart", OVERRIDES).run_dir
    shards = [evalkit.run("quickstart", [*OVERRIDES, f"source.shard={i}/2"]).run_dir
              for i in range(2)]
    merged = merge(shards, Path("runs"))
    repeats = _rows(whole, "repeat-*.parquet", JUDGMENT)
    assert repeats and {r[2] for r in repeats} == {1, 2}
    assert _rows(merged, "repeat-*.parquet", JUDGMENT) == repeats
    assert _rows(merged, "part-*.parquet", JUDGMENT) == _rows(whole, "part-*.parquet", JUDGMENT)
    metrics = {(r["metric"], r["slice"]): r
               for r in pq.read_table(merged / "metrics.parquet").to_pylist()}
    assert metrics[("rep.kappa", "all")]["value"] == 1
    assert sorted(tuple(r[c] for c in METRIC) for r in metrics.values()) == sorted(
        tuple(r[c] for c in METRIC) for r in pq.read_table(whole / "metrics.parquet").to_pylist())
    con = evalkit.connect("runs")
    counts = dict(con.sql("SELECT run_id, count(*) FROM repeats GROUP BY run_id").fetchall())
    assert counts[merged.name] == counts[whole.name] == len(repeats)


def test_compacting_a_run_keeps_its_repeats(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.commands.compact import compact_run

    monkeypatch.chdir(tmp_path)
    run = evalkit.run("quickstart", [*OVERRIDES, "runner.batch_size=50"]).run_dir
    before = (_rows(run, "part-*.parquet", JUDGMENT), _rows(run, "repeat-*.parquet", JUDGMENT))
    metrics = pq.read_table(run / "metrics.parquet").to_pylist()
    assert compact_run(run) >= 2  # the judged batches' parts, now one
    assert len(list((run / "judgments").glob("part-*.parquet"))) == 1
    assert (_rows(run, "part-*.parquet", JUDGMENT),
            _rows(run, "repeat-*.parquet", JUDGMENT)) == before
    assert before[1]
    # the repeatability metric recomputed from the compacted run: as before
    from evalkit.comparison._recompute import RunTables, identity

    tables = RunTables(run, tmp_path / "scratch")
    rep = tables.metrics(inner_ci=True)["rep"]
    tables.use(identity(sorted(tables.ids)))
    again = {r["metric"]: r["value"] for r in rep.compute(tables.con) if r["slice"] == "all"}
    tables.con.close()
    assert again == {r["metric"]: r["value"] for r in metrics
                     if r["metric"].startswith("rep.") and r["slice"] == "all"}
