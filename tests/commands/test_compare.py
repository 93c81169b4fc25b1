"""evalkit compare: paired-bootstrap deltas over shared records, on run directories written
the way the runner writes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalkit.commands._runs import find_run
from evalkit.commands.compare import compare
from evalkit.errors import EvalkitError
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import write_json, write_parquet
from tests.conftest import run_cli

METRICS = {
    "score": {"plugin": "mean", "judge": "g", "raw": False, "slice_by": ["model"]},
    "done": {"plugin": "task_completion", "outcome": "judge:g:passed"},
}


def write_run(runs_dir: Path, run_id: str, values, ids=None, metrics=None) -> Path:
    ids = ids or [f"r{i:03d}" for i in range(len(values))]
    run_dir = runs_dir / "exp" / run_id
    (run_dir / "judgments").mkdir(parents=True)
    write_parquet(conform([{"run_id": run_id, "record_id": r, "model": "ab"[i % 2],
                            "human_label": "1"} for i, r in enumerate(ids)], RECORDS),
                  run_dir / "records.parquet")
    write_parquet(conform([{"run_id": run_id, "record_id": r, "judge": "g", "value": float(v),
                            "passed": bool(v >= 0.5), "status": "ok", "origin": "computed"}
                           for r, v in zip(ids, values, strict=True)], JUDGMENTS),
                  run_dir / "judgments" / "part-00000.parquet")
    write_json({"run_id": run_id, "experiment": "exp", "status": "ok",
                "config": {"metrics": metrics or METRICS}}, run_dir / "manifest.json")
    return run_dir


def by_key(rows):
    return {(r["metric"], r["slice"]): r for r in rows}


def test_a_clear_improvement_is_significant(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.random(60) * 0.5
    with_queue = {**METRICS, "queue": {"plugin": "disagreements", "judge_a": "g",
                                       "human_label": True}}
    a = write_run(tmp_path, "A", base, metrics=with_queue)
    b = write_run(tmp_path, "B", base + 0.3, metrics=with_queue)
    rows = by_key(compare(a, b, n_boot=20))
    score = rows[("score", "all")]
    assert score["delta"] == pytest.approx(0.3)
    assert score["ci_low"] == pytest.approx(0.3) and score["ci_high"] == pytest.approx(0.3)
    assert score["significant"] is True and score["n_shared"] == 60
    assert ("score", "model=a") in rows
    assert rows[("done", "all")]["delta"] > 0
    # the disagreements metric wrote its queue elsewhere, never into the runs compared
    assert not (a / "review").exists() and not (b / "review").exists()


def test_pairing_detects_a_small_consistent_shift_and_identical_runs_do_not_differ(tmp_path):
    rng = np.random.default_rng(1)
    noisy = rng.random(80)
    a = write_run(tmp_path, "A", noisy)
    b = write_run(tmp_path, "B", noisy + 0.02)  # far below the spread between records
    shift = by_key(compare(a, b, n_boot=40, only=["score"]))[("score", "all")]
    assert shift["significant"] is True and shift["ci_low"] > 0
    same = by_key(compare(a, write_run(tmp_path, "C", noisy), n_boot=20,
                          only=["score"]))[("score", "all")]
    assert same["delta"] == 0 and same["significant"] is False


def test_only_shared_records_count(tmp_path):
    a = write_run(tmp_path, "A", [0.1, 0.2, 0.3], ids=["x", "y", "z"])
    b = write_run(tmp_path, "B", [0.9, 0.2, 0.3, 0.4], ids=["w", "x", "y", "z"])
    score = by_key(compare(a, b, n_boot=10))[("score", "all")]
    assert score["n_shared"] == 3
    # on x, y, z: A has 0.1, 0.2, 0.3 and B 0.2, 0.3, 0.4; B's extra record w is left out
    assert score["a"] == pytest.approx(0.2) and score["b"] == pytest.approx(0.3)


def test_errors(tmp_path):
    a = write_run(tmp_path, "A", [0.1, 0.2], ids=["x", "y"])
    b = write_run(tmp_path, "B", [0.1, 0.2], ids=["p", "q"])
    with pytest.raises(EvalkitError, match="share no record_id"):
        compare(a, b, n_boot=5)
    c = write_run(tmp_path, "C", [0.1, 0.2], ids=["x", "y"],
                  metrics={"other": {"plugin": "mean", "judge": "g"}})
    with pytest.raises(EvalkitError, match="no metric in common"):
        compare(a, c, n_boot=5)
    assert find_run("A", tmp_path, "compare") == a and find_run(str(b), tmp_path, "compare") == b
    with pytest.raises(EvalkitError, match="no run 'nope'"):
        find_run("nope", tmp_path, "compare")


def test_cli(tmp_path):
    runs = tmp_path / "runs"
    # 8 records that all rose: p = 2·2⁻⁸ at the least (4 could not show it: 0.125)
    write_run(runs, "A", [0.1, 0.4, 0.2, 0.3] * 2)
    write_run(runs, "B", [0.6, 0.9, 0.7, 0.8] * 2)
    proc = run_cli("compare", "A", "B", "--n-boot", "20", "--metric", "score", cwd=tmp_path)
    assert "score" in proc.stdout and "increase" in proc.stdout and "done" not in proc.stdout
    csv_out = run_cli("compare", "A", "B", "--n-boot", "5", "--format", "csv", cwd=tmp_path)
    assert csv_out.stdout.splitlines()[0].startswith("metric,slice,a,b,delta")
    bad = run_cli("compare", "A", "missing", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "no run 'missing'" in bad.stderr


def test_a_run_from_before_flag_at_is_recomputed_as_it_was(tmp_path):
    # no top-level flag_at in its manifest: its rate counted a score at 0.5 as flagged
    metrics = {"r": {"plugin": "rate", "judge": "g", "threshold": 0.5, "raw": False}}
    old = write_run(tmp_path, "A", [0.5, 0.5, 0.2, 0.9], metrics=metrics)
    new = write_run(tmp_path, "B", [0.5, 0.5, 0.2, 0.9], metrics=metrics)
    manifest = json.loads((new / "manifest.json").read_text())
    manifest["config"]["flag_at"] = ">"
    (new / "manifest.json").write_text(json.dumps(manifest))
    row = by_key(compare(old, new, n_boot=10))[("r", "all")]
    assert row["a"] == 0.75 and row["b"] == 0.25


def test_a_slice_with_no_shared_record_splits_into_nothing_not_nan(tmp_path):
    # model=a holds x, z in A but w, y in B: no record of the slice is in both runs
    a = write_run(tmp_path, "A", [0.1, 0.2, 0.3], ids=["x", "y", "z"])
    b = write_run(tmp_path, "B", [0.9, 0.2, 0.3, 0.4], ids=["w", "x", "y", "z"])
    for row in compare(a, b, n_boot=10):
        for key in ("judge_delta", "system_delta", "judge_ci_low", "system_ci_high"):
            value = row.get(key)
            assert value is None or np.isfinite(value), (row["slice"], key, value)
