"""``source.limit: N``: any source gives its first N records, then is closed."""

import json

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import ConfigError
from evalkit.runner.pipeline import execute


def run(tmp_path, limit, batch_size=3):
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "input": "q", "output": f"a{i}",
                                        "h": i / 10}) + "\n" for i in range(10)))
    cfg = OmegaConf.create({
        "experiment": "limit",
        "source": {"plugin": "jsonl", "path": str(path), "record_id": "id",
                   "scores": {"H": "h"}, "batch_size": batch_size, "limit": limit},
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False},
    })
    return execute(load(cfg))


@pytest.mark.parametrize("limit, batch_size", [(4, 3), (3, 3), (1, 50), (20, 3)])
def test_first_n_records_and_their_imported_scores(tmp_path, limit, batch_size):
    result = run(tmp_path, limit, batch_size)
    ids = pq.read_table(result.run_dir / "records.parquet").column("record_id").to_pylist()
    assert ids == [f"r{i}" for i in range(min(limit, 10))]
    judged = pq.read_table(result.run_dir / "judgments").column("record_id").to_pylist()
    assert sorted(judged) == sorted(ids)
    assert result.manifest["n_records"] == len(ids)


@pytest.mark.parametrize("limit", [0, -2, "ten", 1.5])
def test_a_bad_limit_is_refused(tmp_path, limit):
    with pytest.raises(ConfigError, match="source.limit"):
        run(tmp_path, limit)


def test_a_null_limit_reads_everything(tmp_path):
    assert run(tmp_path, None).manifest["n_records"] == 10
