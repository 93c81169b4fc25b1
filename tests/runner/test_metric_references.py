"""A metric's references (its judge, its columns) are checked before the run like alerts are;
a metric with no value says why in the summary; numbers print in plain notation."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import ConfigError
from evalkit.numbers import plain
from evalkit.runner.pipeline import execute


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("refs") / "data.jsonl"
    path.write_text("".join(json.dumps({
        "id": f"r{i}", "model": "m", "input": "Summarize the ticket.", "output": f"Done {i}.",
        "latency_ms": 1830 + i, "user_action": "kept" if i % 2 else None, "score": 0.3})
        + "\n" for i in range(6)))
    return path


def _run(tmp_path, data, metrics, source=None, summary=False):
    cfg = OmegaConf.create({
        "experiment": "refs",
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id", **(source or {})},
        "filters": {}, "judges": {"prompt_echo": {"plugin": "prompt_echo"}},
        "metrics": metrics, "alerts": [],
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": summary}})
    return execute(load(cfg))


@pytest.mark.parametrize("metric, message", [
    ({"plugin": "rate", "judge": "prompt_eco"},
     r"metrics.x.judge: 'prompt_eco' is not a judge of this run; did you mean 'prompt_echo'"),
    ({"plugin": "rate", "judge": "length_bnd"},
     r"metrics.x.judge: 'length_bnd' is not a judge .*pick one of: prompt_echo"),
    ({"plugin": "latency", "column": "latency"},
     r"metrics.x.column: 'latency' is not a numeric record column; did you mean 'latency_s'"),
    ({"plugin": "rate", "judge": "prompt_echo", "slice_by": ["modle"]},
     r"metrics.x.slice_by: \['modle'\] are not record columns; did you mean 'model'"),
    ({"plugin": "cost_per_success", "outcome": "judge:prompt_ech:passed"},
     r"metrics.x.outcome: 'prompt_ech' is not a judge"),
])
def test_a_metric_pointing_at_nothing_is_refused_before_the_run(tmp_path, data, metric,
                                                                 message):
    with pytest.raises(ConfigError, match=message):
        _run(tmp_path, data, {"x": metric})
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_imported_score_names_and_metadata_paths_are_valid_references(tmp_path, data):
    result = _run(tmp_path, data, {
        "s": {"plugin": "rate", "judge": "S", "threshold": 0.5,
              "slice_by": ["metadata.latency_ms"]}}, source={"scores": {"S": "score"}})
    assert result.manifest["status"] == "ok"


def test_a_metric_without_a_value_says_why_in_the_summary(tmp_path, data, capsys):
    _run(tmp_path, data, {"edit_rate": {"plugin": "edit_rate"},
                          "lat": {"plugin": "latency", "column": "cost_usd"},
                          "ms": {"plugin": "latency", "n_boot": 0}},
         source={"fields": {"latency_s": "latency_ms"}}, summary=True)
    out = capsys.readouterr().out
    assert " 1830 " in out and "e+03" not in out  # latencies in plain notation
    said = " ".join(out.split())  # (a reason wraps at the console's width)
    assert "no value edit_rate [all]: " in said
    assert "user_action 'kept' is not one of accepted, edited, bypassed" in said
    assert "no value lat.p50 [all]: no record with a cost_usd in this slice" in said


@pytest.mark.parametrize("value, digits, text", [
    (1830.0, 3, "1830"), (1834.5, 4, "1834"), (0.0000123456, 3, "0.0000123"),
    (0.5, 3, "0.5"), (12.345, 3, "12.3"), (-0.0456, 3, "-0.0456")])
def test_numbers_print_in_plain_notation(value, digits, text):
    assert plain(value, digits) == text
