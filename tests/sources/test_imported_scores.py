"""Scores a source already carries arrive as judgments with origin='imported' and are
audited exactly like evalkit's own: raw vs filtered, slices, the judgments table."""

import json

import duckdb
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.runner.pipeline import execute

pytestmark = pytest.mark.e2e  # runs evalkit end to end

ENVELOPE = {"completion": None, "reasoning": None, "rawRequest": {"model": "x"}}


def run(tmp_path, source, metrics=None):
    cfg = OmegaConf.create({
        "experiment": "imported", "source": source,
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "metrics": metrics or {},
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False},
    })
    return execute(load(cfg))


def judgments(result):
    con = duckdb.connect()
    return con.execute(
        "SELECT * FROM read_parquet(?) ORDER BY record_id, judge",
        [str(result.run_dir / "judgments" / "*.parquet")]).to_arrow_table().to_pylist()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return str(path)


def test_jsonl_columns_and_nested_list(tmp_path):
    rows = [
        {"id": "a", "output": "fine", "eval": {"hallucination": 0.2},
         "scores": [{"name": "Correctness", "value": 0.9, "comment": "good ✓"},
                    {"name": "Tone", "value": "friendly"}]},
        {"id": "b", "level": "ERROR", "output": ENVELOPE, "eval": {"hallucination": 1.0},
         "scores": [{"name": "Correctness", "value": True}]},
        {"id": "c", "output": "also fine", "eval": {"hallucination": "0.4"}},
        {"id": "d", "output": "no scores at all"},
    ]
    source = {"plugin": "jsonl", "path": write_jsonl(tmp_path / "d.jsonl", rows),
              "record_id": "id", "scores": {"Hallucination": "eval.hallucination"},
              "scores_list": "scores"}
    result = run(tmp_path, source, {"h": {"plugin": "mean", "judge": "Hallucination"}})
    got = {(j["record_id"], j["judge"]): j for j in judgments(result)}
    assert set(got) == {("a", "Hallucination"), ("a", "Correctness"), ("a", "Tone"),
                        ("b", "Hallucination"), ("b", "Correctness"), ("c", "Hallucination")}
    for j in got.values():
        assert (j["origin"], j["plugin"], j["status"]) == ("imported", "imported", "ok")
        assert j["run_id"] == result.run_id
    assert got[("a", "Correctness")]["explanation"] == "good ✓"
    assert got[("a", "Tone")]["label"] == "friendly" and got[("a", "Tone")]["value"] is None
    assert got[("b", "Correctness")]["value"] == 1.0 and got[("b", "Correctness")]["passed"]
    assert got[("c", "Hallucination")]["value"] == 0.4
    # imported scores on the failed call are kept and audited: raw vs filtered
    m = {(r["metric"], r["slice"]): r for r in result.metrics.to_pylist()}
    assert m[("h.raw", "all")]["value"] == pytest.approx((0.2 + 1.0 + 0.4) / 3)
    assert m[("h", "all")]["value"] == pytest.approx(0.3)
    assert m[("h", "all")]["n_excluded"] == 1


def test_csv_score_columns(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,output,judge_score\nx,hello,0.7\ny,world,\nz,again,0.1\n")
    source = {"plugin": "csv", "path": str(path), "record_id": "id",
              "scores": {"Judge": "judge_score"}}
    result = run(tmp_path, source)
    got = {j["record_id"]: j["value"] for j in judgments(result)}
    assert got == {"x": 0.7, "z": 0.1}  # an empty cell is no score, not a zero


def test_bad_score_rejects_the_row_and_its_scores(tmp_path):
    rows = [{"id": "ok", "output": "fine", "scores": [{"name": "H", "value": 0.1}]},
            {"id": "bad", "output": "fine", "scores": [{"name": "H", "value": {"x": 1}}]},
            {"id": "noname", "output": "fine", "scores": [{"value": 1}]},
            {"id": "notalist", "output": "fine", "scores": {"H": 1}}]
    source = {"plugin": "jsonl", "path": write_jsonl(tmp_path / "d.jsonl", rows),
              "record_id": "id", "scores_list": "scores"}
    result = run(tmp_path, source)
    assert [j["record_id"] for j in judgments(result)] == ["ok"]
    rejects = pq.read_table(result.run_dir / "rejects.parquet").to_pylist()
    assert [r["location"].rsplit(":", 1)[1] for r in rejects] == ["2", "3", "4"]
    assert all(r["reason"].startswith("imported score:") for r in rejects)
    records = pq.read_table(result.run_dir / "records.parquet").column("record_id").to_pylist()
    assert records == ["ok"]
