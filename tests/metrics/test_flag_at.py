"""One setting, ``flag_at``, decides how a score exactly at a threshold counts, with the same
meaning in rate, crosstab, agreement (kappa), judge_validation and alerts. The default is
``>`` (the audit evalkit reproduces counts ``> 0.5``); scores here sit on the threshold."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, run_dirs

# imported scores: two exactly at the 0.5 threshold
ROWS = [{"id": "a", "model": "m", "output": "x", "h": 0.5, "human_label": "1"},
        {"id": "b", "model": "m", "output": "x", "h": 0.75, "human_label": "1"},
        {"id": "c", "model": "n", "output": "x", "h": 0.25, "human_label": "0"},
        {"id": "d", "model": "n", "output": "x", "h": 0.5, "human_label": "1"}]
EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
experiment: edge
source:
  path: data.jsonl
  record_id: id
  scores: {h: h}
metrics:
  h_rate: {plugin: rate, judge: h, threshold: 0.5, n_boot: 0}
  h_mean: {plugin: mean, judge: h, n_boot: 0, raw: false}
  h_by_model: {plugin: crosstab, judge: h, threshold: 0.5, by: model, n_boot: 0}
  h_agree: {plugin: agreement, judge_a: h, human_label: true, threshold: 0.5, n_boot: 0}
  h_valid: {plugin: judge_validation, judge_a: h, human_label: true, threshold: 0.5,
            n_boot: 0}
alerts:
  - {metric: h_mean, value: 0.5, severity: warning}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("flag_at")
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "conf" / "experiment" / "edge.yaml").write_text(EXPERIMENT)
    (cwd / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return cwd


# Hydra's override grammar wants > and >= quoted: evalkit run ... "flag_at='>='"
def run(project: Path, *overrides: str) -> tuple[dict, list, dict]:
    run_cli("run", "+experiment=edge", "runner.summary=false", "filters=[]", *overrides,
            cwd=project)
    run_dir = run_dirs(project, "edge")[-1]
    metrics = {(m["metric"], m["slice"]): m["value"]
               for m in pq.read_table(run_dir / "metrics.parquet").to_pylist()}
    alerts = pq.read_table(run_dir / "alerts.parquet").to_pylist()
    config = json.loads((run_dir / "manifest.json").read_text())["config"]
    return metrics, alerts, config


def test_default_is_strictly_above(project: Path) -> None:
    metrics, alerts, config = run(project)
    assert metrics[("h_rate", "all")] == 0.25  # only 0.75 is above 0.5
    assert metrics[("h_by_model.flagged", "all")] == 0.25
    assert metrics[("h_valid.precision", "all")] == 1.0  # b flagged, and labelled 1
    assert metrics[("h_valid.recall", "all")] == pytest.approx(1 / 3)  # a, d (0.5) not
    assert metrics[("h_agree.kappa", "all")] == pytest.approx(0.2)
    assert alerts == []  # h_mean = 0.5 is not > 0.5
    assert config["metrics"]["h_rate"]["flag_at"] == ">"  # recorded, for compare


def test_one_setting_flags_at_the_threshold_everywhere(project: Path) -> None:
    metrics, alerts, config = run(project, "flag_at='>='")
    assert metrics[("h_rate", "all")] == 0.75
    assert metrics[("h_by_model.flagged", "all")] == 0.75
    assert metrics[("h_valid.precision", "all")] == 1.0
    assert metrics[("h_valid.recall", "all")] == 1.0
    assert metrics[("h_agree.kappa", "all")] == pytest.approx(1.0)
    assert [a["operator"] for a in alerts] == [">="]  # h_mean = 0.5 >= 0.5
    assert {m["flag_at"] for m in config["metrics"].values() if "flag_at" in m} == {">="}


def test_an_instance_may_still_say_otherwise_and_a_bad_value_is_refused(project: Path
                                                                        ) -> None:
    metrics, _, _ = run(project, "flag_at='>='", "+metrics.h_rate.flag_at='>'")
    assert metrics[("h_rate", "all")] == 0.25
    assert metrics[("h_by_model.flagged", "all")] == 0.75
    bad = run_cli("run", "+experiment=edge", "flag_at='>>'", cwd=project, check=False)
    assert bad.returncode == 2 and "flag_at: '>>' is not one of > or >=" in bad.stderr


def test_rate_counts_passed_one_setting_away(project: Path) -> None:
    metrics, _, _ = run(project, "+metrics.h_rate.count=passed")
    assert metrics[("h_rate", "all")] == 0.75
