"""Alerts: thresholds in config, written to the alerts table, printed in the summary, and
``runner.fail_on`` turning them into a non-zero exit."""

import json

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import ConfigError, RunFailed
from evalkit.runner.pipeline import execute

ENVELOPE = {"completion": None, "rawRequest": {"model": "m", "max_tokens": 720000}}


@pytest.fixture
def data(tmp_path):
    rows = []
    for i in range(20):
        failed = i < 5
        rows.append({"id": f"r{i}", "model": "small" if i % 2 else "large",
                     "level": "ERROR" if failed else "DEFAULT",
                     "input": "Summarize: the export times out for big reports.",
                     "output": ENVELOPE if failed else
                     ("the export times out for big reports." if i < 9 else f"Answer {i}."),
                     "hallucination": 0.95 if i < 12 else 0.1})
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(tmp_path, data, alerts, fail_on=None, summary=False):
    cfg = OmegaConf.create({
        "experiment": "alerts",
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id",
                   "scores": {"H": "hallucination"}},
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": {"prompt_echo": {"plugin": "prompt_echo"}},
        "metrics": {"echo_rate": {"plugin": "rate", "judge": "prompt_echo",
                                  "slice_by": ["model"]},
                    "h_rate": {"plugin": "rate", "judge": "H", "threshold": 0.5}},
        "alerts": alerts,
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": summary,
                   "fail_on": fail_on},
    })
    return execute(load(cfg))


def alert_rows(result):
    return pq.read_table(result.run_dir / "alerts.parquet").to_pylist()


def test_threshold_crossed_is_written(tmp_path, data):
    # echo: records 5..8 of the 15 genuine ones copy the prompt -> 4/15
    result = run(tmp_path, data, [
        {"metric": "echo_rate", "operator": ">", "value": 0.2, "severity": "warning"},
        {"metric": "echo_rate", "operator": ">", "value": 0.5, "severity": "error"},
        {"metric": "h_rate.raw", "operator": ">=", "value": 0.6, "severity": "info",
         "message": "raw flag rate at or above 60%"},
    ])
    rows = alert_rows(result)
    assert [(r["metric"], r["severity"], r["operator"], r["threshold"]) for r in rows] == [
        ("echo_rate", "warning", ">", 0.2), ("h_rate.raw", "info", ">=", 0.6)]
    assert rows[0]["value"] == pytest.approx(4 / 15)
    assert rows[0]["slice"] == "all"
    assert rows[0]["message"] == "echo_rate [all] = 0.2667 > 0.2"
    assert rows[1]["message"] == "raw flag rate at or above 60%"


@pytest.mark.parametrize("operator, value, fires", [
    ("<", 0.3, True), ("<=", 4 / 15, True), ("==", 4 / 15, True), ("!=", 4 / 15, False),
    (">=", 0.27, False),
])
def test_operators(tmp_path, data, operator, value, fires):
    result = run(tmp_path, data, [{"metric": "echo_rate", "operator": operator,
                                   "value": value, "severity": "warning"}])
    assert bool(alert_rows(result)) is fires


def test_slices_one_or_all(tmp_path, data):
    result = run(tmp_path, data, [
        {"metric": "echo_rate", "slice": "model=small", "value": 0.0, "severity": "info"},
        {"metric": "echo_rate", "slice": "*", "value": 0.0, "severity": "warning"},
    ])
    got = sorted((r["severity"], r["slice"]) for r in alert_rows(result))
    assert got == [("info", "model=small"), ("warning", "all"), ("warning", "model=large"),
                   ("warning", "model=small")]


def test_alert_on_a_metric_not_produced_is_a_config_error(tmp_path, data):
    """(tests/runner/test_gate.py has the whole class: names, statistics, slices.)"""
    with pytest.raises(ConfigError, match=r"alerts\[0\]\.metric: 'nope' is not a metric"):
        run(tmp_path, data, [{"metric": "nope", "value": 1, "severity": "error"}])


def test_an_alert_on_a_slice_value_no_record_has_fails_closed(tmp_path, data):
    """The slice's column is valid (checked before the run), its value is known only from
    the data: no row for it is a row at the alert's severity, and fail_on fails the run."""
    alert = {"metric": "echo_rate", "slice": "model=tiny", "value": 1, "severity": "error"}
    rows = alert_rows(run(tmp_path, data, [alert]))
    assert [(r["severity"], r["slice"]) for r in rows] == [("error", "model=tiny")]
    assert "cannot be checked" in rows[0]["message"]
    with pytest.raises(RunFailed, match="cannot be checked"):
        run(tmp_path, data, [alert], fail_on="error")


def test_fail_on_error_exits_non_zero_only_for_error_alerts(tmp_path, data):
    warn = [{"metric": "echo_rate", "value": 0.2, "severity": "warning"}]
    run(tmp_path, data, warn, fail_on="error")  # a warning does not fail the run
    with pytest.raises(RunFailed, match="1 alert.*runner.fail_on=warning") as info:
        run(tmp_path, data, warn, fail_on="warning")
    assert info.value.exit_code == 3
    with pytest.raises(RunFailed, match="fail_on=error"):
        run(tmp_path, data, [{"metric": "h_rate.raw", "value": 0.5, "severity": "error"}],
            fail_on="error")
    # info alerts never fail a run gated on warnings
    run(tmp_path, data, [{"metric": "echo_rate", "value": 0.2, "severity": "info"}],
        fail_on="warning")


def test_run_dir_is_complete_when_the_gate_fails(tmp_path, data):
    with pytest.raises(RunFailed):
        run(tmp_path, data, [{"metric": "echo_rate", "value": 0.2, "severity": "error"}],
            fail_on="error")
    (run_dir,) = (tmp_path / "runs" / "alerts").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert pq.read_table(run_dir / "alerts.parquet").num_rows == 1


def test_summary_shows_alerts(tmp_path, data, capsys):
    run(tmp_path, data, [{"metric": "echo_rate", "value": 0.2, "severity": "warning",
                          "message": "too many echoes"}], summary=True)
    assert "alert warning: too many echoes" in capsys.readouterr().out


@pytest.mark.parametrize("alert, message", [
    ({"metric": "m", "value": 1, "operator": "=>"}, "alerts\\[0\\].operator"),
    ({"metric": "m", "value": 1, "severity": "fatal"}, "alerts\\[0\\].severity"),
    ({"metric": "m"}, "alerts\\[0\\].value: required"),
    ({"metric": "m", "value": 1, "sevrity": "error"}, "did you mean 'severity'"),
])
def test_bad_alert_config(tmp_path, data, alert, message):
    with pytest.raises(ConfigError, match=message):
        run(tmp_path, data, [alert])


def test_bad_fail_on(tmp_path, data):
    with pytest.raises(ConfigError, match="runner.fail_on"):
        run(tmp_path, data, [], fail_on="critical")


def test_remediation_hints_are_stored_and_printed(tmp_path, data, capsys):
    hints = ["Check the judge's rubric against ten flagged records",
             "Set judges.prompt_echo.threshold higher if the prompts are templates"]
    result = run(tmp_path, data, [
        {"metric": "echo_rate", "value": 0.2, "severity": "warning", "hints": hints},
        {"metric": "h_rate", "value": 2.0, "hints": ["never fires"]},
    ], summary=True)
    rows = alert_rows(result)
    assert [r["hints"] for r in rows] == [hints]
    out = capsys.readouterr().out
    for hint in hints:
        assert f"hint: {hint}" in out
