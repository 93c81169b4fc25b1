"""The CI gate has no silent hole: an alert on a metric name or slice the run cannot produce
is a config error before anything runs (exit 2, naming the key and the valid names), every
built-in metric writes only what it declares (``Metric.produces()``), and a judge whose
calls mostly failed fails the run (``runner.max_judge_error_rate``, exit 4) with its top
error causes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import ConfigError, JudgeErrorBudgetExceeded
from evalkit.runner.pipeline import execute

EVALKIT = str(Path(sys.executable).with_name("evalkit"))
ENVELOPE = {"completion": None, "rawRequest": {"model": "m", "max_tokens": 720000}}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    rows = [{"id": f"r{i}", "model": "small" if i % 2 else "large",
             "level": "ERROR" if i < 3 else "DEFAULT", "latency": 0.1 * i,
             "input": "Summarize: the export times out for big reports.",
             "output": ENVELOPE if i < 3 else
             ("the export times out for big reports." if i < 8 else f"Answer {i}."),
             "h": 0.9 if i < 10 else 0.1, "c": 0.8 if i % 3 else 0.2, "y": i % 2}
            for i in range(20)]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


METRICS = {
    "echo_rate": {"plugin": "rate", "judge": "prompt_echo", "slice_by": ["model"]},
    "echo_mean": {"plugin": "mean", "judge": "prompt_echo", "raw": False},
    "latency": {"plugin": "latency", "slice_by": ["model"], "percentiles": [50, 90]},
    "h_dist": {"plugin": "distribution", "judge": "H"},
    "calibration": {"plugin": "ece", "prob": "judge:C", "correct": "judge:Y", "n_bins": 5},
    "h_vs_c": {"plugin": "agreement", "judge_a": "H", "judge_b": "C"},
    "levels": {"plugin": "crosstab", "judge": "H", "by": "level"},
    "modes": {"plugin": "crosstab", "judge": "prompt_echo", "of": "label", "by": "model"},
}


def config(tmp_path: Path, data: Path, alerts: list, metrics: dict | None = None,
           **runner) -> OmegaConf:
    return OmegaConf.create({
        "experiment": "gate",
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id",
                   "fields": {"latency_s": "latency"},
                   "scores": {"H": "h", "C": "c", "Y": "y"}},
        "judges": {"prompt_echo": {"plugin": "prompt_echo"}},
        "metrics": METRICS if metrics is None else metrics,
        "alerts": alerts,
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False, **runner},
    })


@pytest.mark.parametrize("metric, valid", [
    ("echo_rat", "echo_rate"),  # a typo of a name
    ("latency.p95", "latency.p90"),  # a percentile the config does not ask for
    ("echo_mean.raw", "echo_mean"),  # raw: false
    ("h_dist.p99", "h_dist.p95"),
    ("levels.flaged", "levels.flagged"),
    ("calibration.mse", "calibration.mce"),
])
def test_an_alert_on_a_name_no_metric_produces_fails_before_the_run(tmp_path, data, metric,
                                                                     valid):
    with pytest.raises(ConfigError) as err:
        execute(load(config(tmp_path, data, [{"metric": metric, "value": 0.1}])))
    message = str(err.value)
    assert message.startswith(f"alerts[0].metric: '{metric}' is not a metric") and valid in \
        message and len(message.splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nothing ran


@pytest.mark.parametrize("metric, slice_", [
    ("echo_rate", "modle=small"),  # a column the metric is not sliced by
    ("echo_mean", "model=small"),  # a metric with no slices but all
    ("levels.flagged", "model=x"),  # crosstab slices by its `by` column
    ("echo_rate", "small"),  # not column=value
])
def test_an_alert_on_a_slice_that_cannot_exist_fails_before_the_run(tmp_path, data, metric,
                                                                    slice_):
    with pytest.raises(ConfigError, match=r"alerts\[1\]\.slice: .* valid slices"):
        execute(load(config(tmp_path, data, [{"metric": "echo_rate", "value": 2},
                                             {"metric": metric, "slice": slice_,
                                              "value": 0.1}])))
    assert not (tmp_path / "runs").exists()


def test_alerts_on_what_the_metrics_declare_run(tmp_path, data):
    alerts = [{"metric": m, "slice": s, "value": 2.0, "severity": "warning"} for m, s in [
        ("echo_rate", "model=small"), ("echo_rate.filter_effect", "*"),
        ("latency.p90", "model=large"), ("h_dist.std", "all"), ("calibration.brier", "all"),
        ("h_vs_c.kappa", "all"), ("levels.not_flagged", "level=ERROR"),
        ("modes.echo", "model=small"),  # a label of the judge's: the data decides
    ]]
    result = execute(load(config(tmp_path, data, alerts)))
    assert result.manifest["status"] == "ok"


def test_every_metric_writes_only_the_names_and_slices_it_declares(tmp_path, data):
    """Closes the class: a metric whose output drifts from its declaration breaks here."""
    from evalkit.runner.run import _make

    rc = load(config(tmp_path, data, []))
    result = execute(rc)
    declared = {inst.name: _make(inst, None).produces() for inst in rc.metrics}
    rows = pq.read_table(result.run_dir / "metrics.parquet").to_pylist()
    assert {r["plugin"] for r in rows} >= {"rate", "mean", "latency", "distribution", "ece",
                                           "agreement", "crosstab"}
    for row in rows:
        produces = declared[row["metric"].split(".")[0]]
        assert row["metric"] in produces.names or row["metric"].startswith(produces.prefixes), \
            row["metric"]
        if row["slice"] != "all":
            assert row["slice"].partition("=")[0] in produces.slice_by, row


DOWN = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]
experiment: down
source:
  path: ${evalkit.data:begin_wow.jsonl}
  record_id: id
  limit: 30
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: http://127.0.0.1:9/v1  # the discard port: nothing listens
    max_retries: 0
"""


def _run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (cwd / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    (cwd / "conf" / "experiment" / "down.yaml").write_text(DOWN)
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run([EVALKIT, "run", "+experiment=down", "runner.summary=false", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_run_whose_llm_judge_failed_every_call_does_not_exit_0(tmp_path):
    """The judge endpoint is down: every call fails. The run is written (status ok: its
    tables are complete) and exits 4 with the judges and their top error causes."""
    proc = _run_cli(tmp_path)
    assert proc.returncode == 4, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "hallucination_llm" in lines[0] and "30/30" in lines[0] and \
        "runner.max_judge_error_rate=0.1" in lines[0] and "top causes" in lines[0]
    (run_dir,) = (tmp_path / "runs" / "down").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "ok"
    # the budget is a setting: off, the same run exits 0
    off = _run_cli(tmp_path, "runner.max_judge_error_rate=null")
    assert off.returncode == 0, off.stderr[-2000:]


def test_judge_errors_within_the_budget_pass_and_above_it_fail(tmp_path, data, monkeypatch):
    """prompt_echo errs on 3 of the 17 records it judges (the pipeline_failure filter sets
    the 3 envelopes aside): 18% fails a 0.1 budget, passes a 0.2 one."""
    from evalkit.judges import prompt_echo

    judge = prompt_echo.PromptEchoJudge.judge

    def failing(self, records):
        out = judge(self, records)
        rows = out.to_pylist() if hasattr(out, "to_pylist") else list(out)
        for row in rows:
            if row["record_id"] in ("r3", "r4", "r5"):
                row.update(status="error", value=None, label=None, passed=None,
                           error="TimeoutError: judge took too long", error_cause="timeout")
        return rows

    monkeypatch.setattr(prompt_echo.PromptEchoJudge, "judge", failing)
    metrics = {"echo_rate": METRICS["echo_rate"]}
    with pytest.raises(JudgeErrorBudgetExceeded) as err:
        execute(load(config(tmp_path, data, [], metrics, max_judge_error_rate=0.1)))
    assert err.value.exit_code == 4
    assert "prompt_echo 3/17 (18%" in str(err.value) and "timeout 3" in str(err.value)
    result = execute(load(config(tmp_path, data, [], metrics, max_judge_error_rate=0.2)))
    assert result.manifest["judgments"]["prompt_echo"]["error"] == 3
