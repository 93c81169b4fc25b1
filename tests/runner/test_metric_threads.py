"""Metrics computed on a thread per core (every metric ``thread_safe``): the same rows, in
config order, as on the run's thread; a rate and a mean of one judge share a thread and one
judged table; one metric that is not thread-safe keeps them all on the run's thread; a
metric's error still fails the run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import EvalkitError
from evalkit.metrics import _judged
from evalkit.metrics.latency import LatencyMetric
from evalkit.runner import metrics as runner_metrics
from evalkit.runner.pipeline import execute

METRICS = {
    "echo_rate": {"plugin": "rate", "judge": "prompt_echo", "slice_by": ["model"]},
    "latency": {"plugin": "latency", "slice_by": ["model"]},
    "echo_mean": {"plugin": "mean", "judge": "prompt_echo", "slice_by": ["model"]},
    "refusal_rate": {"plugin": "rate", "judge": "refusal"},
    "echo_by_level": {"plugin": "rate", "judge": "prompt_echo", "slice_by": ["level"]},
}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rows = [{"id": f"r{i}", "model": f"m{i % 3}", "latency_s": 0.1 * (i % 17),
             "level": "ERROR" if i % 11 == 0 else "DEFAULT", "input": f"Copy this {i} text.",
             "output": f"copy this {i} text" if i % 3 else "I'm sorry, but I can't help."}
            for i in range(90)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, data: Path, name: str, metrics: dict[str, Any] = METRICS) -> Path:
    cfg = OmegaConf.create({
        "experiment": name,
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id", "workers": 0},
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": {"prompt_echo": {"plugin": "prompt_echo"}, "refusal": {"plugin": "refusal"}},
        "metrics": metrics,
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False},
    })
    return execute(load(cfg)).run_dir


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    return pq.read_table(run_dir / "metrics.parquet").drop_columns(["run_id"]).to_pylist()


@pytest.fixture
def seen(monkeypatch) -> list[tuple[str, str]]:
    """(thread, what) for every metric computed and every judged table loaded."""
    out: list[tuple[str, str]] = []
    compute = LatencyMetric.compute
    load_judged = _judged._load

    def latency(self: Any, con: Any) -> Any:
        out.append((threading.current_thread().name, "latency"))
        return compute(self, con)

    def judged(con: Any, judge: str, slice_by: list[str]) -> Any:
        out.append((threading.current_thread().name, f"judged {judge} {slice_by}"))
        return load_judged(con, judge, slice_by)

    monkeypatch.setattr(LatencyMetric, "compute", latency)
    monkeypatch.setattr(_judged, "_load", judged)
    return out


def test_threads_give_the_rows_of_the_runs_thread(tmp_path, data, monkeypatch, seen):
    monkeypatch.setattr(runner_metrics.os, "cpu_count", lambda: 2)
    threaded = _metrics(_run(tmp_path, data, "threaded"))
    on_threads = list(seen)
    seen.clear()
    monkeypatch.setattr(runner_metrics.os, "cpu_count", lambda: 1)
    inline = _metrics(_run(tmp_path, data, "inline"))
    assert threaded == inline
    assert [r["metric"] for r in threaded][:1] == ["echo_rate"]  # config order
    assert {t for t, _ in on_threads} <= {"evalkit-metrics_0", "evalkit-metrics_1"}
    # one judged table per judge and slices: the rate and the mean of prompt_echo share one
    assert sorted(w for _, w in on_threads) == [
        "judged prompt_echo ['level']", "judged prompt_echo ['model']", "judged refusal []",
        "latency"]
    assert {t for t, _ in seen} == {"MainThread"}


def test_a_metric_that_is_not_thread_safe_keeps_all_on_the_runs_thread(tmp_path, data,
                                                                        monkeypatch, seen):
    monkeypatch.setattr(runner_metrics.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(LatencyMetric, "thread_safe", False)
    _run(tmp_path, data, "one_unsafe")
    assert {t for t, _ in seen} == {"MainThread"}


def test_a_metric_error_on_a_thread_fails_the_run(tmp_path, data, monkeypatch):
    monkeypatch.setattr(runner_metrics.os, "cpu_count", lambda: 2)

    def broken(self: Any, con: Any) -> Any:
        raise EvalkitError("latency broke")

    monkeypatch.setattr(LatencyMetric, "compute", broken)
    with pytest.raises(EvalkitError, match="latency broke"):
        _run(tmp_path, data, "broken")
    (manifest,) = (tmp_path / "runs" / "broken").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["status"] == "failed"
    assert not list((tmp_path / "runs" / "broken").glob("*/metrics.parquet"))
