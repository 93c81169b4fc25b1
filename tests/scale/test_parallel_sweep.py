"""Parallel sweeps on Hydra's joblib launcher: each job its own run directory stamped with
the sweep's id and job number; a failed job loses nothing of the others; the closing table
and the exit code say which failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.runner import sweep
from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end


@pytest.mark.parametrize("launcher", [["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                      ["hydra/launcher=submitit_local"]],
                         ids=["joblib", "submitit_local"])
def test_a_parallel_sweep_keeps_the_good_jobs_and_names_the_failed_one(
        tmp_path: Path, launcher: list[str]) -> None:
    proc = run_cli("run", "-m", "+experiment=quickstart",
                   "judges.prompt_echo.threshold=0.5,abc,0.9", *launcher,
                   "runner.summary=false", cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr  # the failed job's own exit code (a config error)
    dirs = run_dirs(tmp_path, "quickstart")
    assert len(dirs) == 2  # jobs 0 and 2 both finished
    manifests = [json.loads((d / "manifest.json").read_text()) for d in dirs]
    assert {m["status"] for m in manifests} == {"ok"}
    assert sorted(m["sweep_job"] for m in manifests) == [0, 2]
    assert len({m["sweep_id"] for m in manifests}) == 1 and manifests[0]["sweep_id"]
    out = proc.stdout
    assert "3 jobs, 1 failed" in out
    assert "job 1 failed" in out and "threshold" in out
    assert "echo_rate" in out and "[" in out  # headline metrics with their intervals
    rows = run_cli("query", "SELECT sweep_id, sweep_job FROM runs ORDER BY sweep_job",
                   "--format", "jsonl", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(r)["sweep_job"] for r in rows] == [0, 2]
    assert json.loads(rows[0])["sweep_id"] == manifests[0]["sweep_id"]


def test_a_sweep_that_all_succeeds_exits_zero_and_a_plain_run_has_no_sweep(
        tmp_path: Path) -> None:
    proc = run_cli("run", "-m", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5,0.9",
                   "hydra/launcher=joblib", "runner.summary=false", cwd=tmp_path)
    assert "2 jobs, 0 failed" in proc.stdout
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=tmp_path)
    rows = run_cli("query", "SELECT sweep_job FROM runs ORDER BY sweep_job NULLS LAST",
                   "--format", "jsonl", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(r)["sweep_job"] for r in rows] == [0, 1, None]


def test_a_job_whose_process_died_counts_as_failed(tmp_path: Path) -> None:
    status = tmp_path / "status.jsonl"
    status.write_text(
        json.dumps({"job": 0, "event": "start", "overrides": ["a=1"]}) + "\n"
        + json.dumps({"job": 1, "event": "start", "overrides": ["a=2"]}) + "\n"
        + json.dumps({"job": 1, "event": "end", "status": "ok", "exit": 0,
                      "run_dir": None}) + "\n")
    done = sweep.jobs(status)
    assert [(j["job"], j["status"], j["exit"]) for j in done] == [(0, "failed", 1),
                                                                 (1, "ok", 0)]
    assert sweep.finish(status) == 1 and not status.exists()
