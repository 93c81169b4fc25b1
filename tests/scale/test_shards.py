"""``source.shard=i/n`` splits any source by a hash of record_id; ``evalkit merge`` puts the
shards of one logical run together and computes the metrics over the merged tables: they
equal the unsharded run's, interval and all."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evalkit.runner.shard import parse_shard
from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end

COLS = ["metric", "slice", "value", "ci_low", "ci_high", "n_attempted", "n_excluded",
        "n_judged", "n_unscored"]


def _metrics(run_dir: Path) -> list[tuple]:
    rows = pq.read_table(run_dir / "metrics.parquet", columns=COLS).to_pylist()
    return sorted(tuple(r[c] for c in COLS) for r in rows)


def test_merged_shards_give_the_unsharded_run_metrics(tmp_path: Path) -> None:
    run_cli("run", "-m", "+experiment=quickstart", "source.shard=0/3,1/3,2/3",
            "runner.summary=false", cwd=tmp_path)
    shards = run_dirs(tmp_path, "quickstart")
    assert len(shards) == 3
    ids = [set(pq.read_table(d / "records.parquet").column("record_id").to_pylist())
           for d in shards]
    assert all(ids) and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    proc = run_cli("merge", *(d.name for d in shards), cwd=tmp_path)
    merged = Path(tmp_path / proc.stdout.split(" into ")[1].strip().rstrip("/"))
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=tmp_path)
    [whole] = [d for d in run_dirs(tmp_path, "quickstart") if d not in shards and d != merged]
    assert set().union(*ids) == set(
        pq.read_table(whole / "records.parquet").column("record_id").to_pylist())
    assert _metrics(merged) == _metrics(whole)
    manifest = json.loads((merged / "manifest.json").read_text())
    assert manifest["n_records"] == 160 and manifest["shards"] == 3
    assert sorted(manifest["merged_from"]) == sorted(d.name for d in shards)
    assert "shard" not in manifest["config"]["source"]
    # the merged run is queried as any other
    out = run_cli("query", f"SELECT count(*) AS n FROM judgments WHERE run_id = '{merged.name}'",
                  "--format", "jsonl", cwd=tmp_path).stdout
    assert json.loads(out)["n"] == manifest["n_judgments"]

    # a missing shard is refused, and nothing is written
    by_shard = {json.loads((d / "manifest.json").read_text())["config"]["source"]["shard"]: d
                for d in shards}
    proc = run_cli("merge", by_shard["0/3"].name, by_shard["1/3"].name, cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2 and "missing [2]" in proc.stderr
    assert len(run_dirs(tmp_path, "quickstart")) == 5


@pytest.mark.parametrize("bad", ["3/3", "1", "a/b", "0/0", "-1/2"])
def test_a_bad_shard_is_a_one_line_error(bad: str) -> None:
    from evalkit.errors import ConfigError

    with pytest.raises(ConfigError, match="source.shard=i/n"):
        parse_shard(bad)
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) is None
