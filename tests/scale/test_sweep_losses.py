"""What a sweep's closing table says when jobs are lost rather than failed: a job whose
process died names the run it left (and how to finish it), a job the launcher never started
is listed, and an interrupted job says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.runner import sweep
from tests.conftest import run_cli, run_dirs


def _status(path: Path, *events: dict) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_a_job_that_died_names_its_run_and_how_to_finish_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "runs" / "quickstart" / "20260101T000000-abcdef"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"status": "running"}))
    status = _status(tmp_path / "s.jsonl",
                     {"job": 0, "event": "start", "overrides": ["a=1"]},
                     {"job": 0, "event": "run", "run_dir": str(run)},
                     {"job": 1, "event": "start", "overrides": ["a=2"]},
                     {"job": 1, "event": "run", "run_dir": str(tmp_path / "never-made")},
                     {"job": 2, "event": "start", "overrides": ["a=3"]},
                     {"job": 2, "event": "end", "status": "failed", "exit": 130,
                      "error": "interrupted", "run_dir": None})
    monkeypatch.setenv("COLUMNS", "200")
    assert sweep.finish(status) == 130
    out = capsys.readouterr().out
    assert run.name in out and f"--resume {run.name}" in out
    assert "never-made" not in out  # no manifest: the run never started
    assert "interrupted (exit 130)" in out and "job 2 interrupted: interrupted" in out


def test_jobs_the_launcher_never_started_are_listed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    status = _status(tmp_path / "s.jsonl",
                     {"job": 0, "event": "start", "overrides": ["+experiment=q", "a=1"]},
                     {"job": 0, "event": "end", "status": "ok", "exit": 0, "run_dir": None})
    planned = sweep.planned(["-m", "+experiment=q", "a=1,2,3", "hydra/launcher=joblib",
                             "hydra.launcher.n_jobs=2"])
    assert planned == [["+experiment=q", "a=1"], ["+experiment=q", "a=2"],
                       ["+experiment=q", "a=3"]]
    monkeypatch.setenv("COLUMNS", "200")
    assert sweep.finish(status, planned) == 1
    out = capsys.readouterr().out
    assert "3 jobs, 2 failed" in out
    assert out.count("not run") >= 2 and "a=3" in out
    assert sweep.planned(["-m", "a=range(0,3)", "hydra/sweeper=optuna"]) is None


@pytest.mark.e2e
def test_a_joblib_job_killed_mid_run_leaves_a_named_run_and_every_job_listed(
        tmp_path: Path) -> None:
    proc = run_cli("run", "-m", "+experiment=quickstart", "source.batch_size=1000,40,1000",
                   "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "runner.summary=false",
                   cwd=tmp_path, env={"EVALKIT_FAULT": "kill@batch_read#3"}, check=False)
    assert proc.returncode == 1, proc.stderr
    killed = [d for d in run_dirs(tmp_path, "quickstart")
              if json.loads((d / "manifest.json").read_text())["sweep_job"] == 1]
    assert len(killed) == 1
    out = proc.stdout
    assert "3 jobs" in out and f"--resume {killed[0].name}" in out
    for job in ("│ 0 ", "│ 1 ", "│ 2 "):
        assert job in out


def test_the_table_waits_for_jobs_still_running_when_the_launcher_stops(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Hydra's submitit launcher returns at the first job that died, while the jobs after it
    # still run: the closing table must not call them dead, nor the sweep end under them
    import socket
    import subprocess
    import sys

    status = tmp_path / "s.jsonl"
    end = json.dumps({"job": 1, "event": "end", "status": "ok", "exit": 0, "run_dir": None})
    child = subprocess.Popen([sys.executable, "-c",
                              f"import time; time.sleep(1.5); open({str(status)!r}, 'a')"
                              f".write({end!r} + '\\n')"])
    _status(status,
            {"job": 0, "event": "start", "overrides": ["a=1"], "pid": 999_999_999,
             "host": socket.gethostname()},
            {"job": 1, "event": "start", "overrides": ["a=2"], "pid": child.pid,
             "host": socket.gethostname()})
    monkeypatch.setenv("COLUMNS", "200")
    assert sweep.finish(status) == 1
    child.wait()
    out = capsys.readouterr()
    assert "waiting for job 1" in out.err
    assert "2 jobs, 1 failed" in out.out and "job 0 failed" in out.out
    assert "job 1 failed" not in out.out


def test_after_ctrl_c_the_table_waits_a_bounded_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
    try:
        status = _status(tmp_path / "s.jsonl",
                         {"job": 0, "event": "start", "overrides": ["a=1"], "pid": child.pid,
                          "host": socket.gethostname()})
        monkeypatch.setenv("COLUMNS", "200")
        t0 = time.monotonic()
        assert sweep.finish(status, wait_s=0.5) == 1
        assert time.monotonic() - t0 < 5
    finally:
        child.kill()
        child.wait()
    assert "job 0 failed" in capsys.readouterr().out


def test_no_table_when_no_job_started(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Hydra refused the sweep before launching (an unknown experiment): its error is enough
    status = _status(tmp_path / "s.jsonl")
    assert sweep.finish(status, [["+experiment=nosuch"], ["+experiment=quickstart"]]) == 0
    assert "not run" not in capsys.readouterr().out
