"""A run's lifecycle as a reader sees it: ``running`` then ``ok``, ``failed`` or
``interrupted`` in the ``runs`` table; an existing run id refused unless resumed; two runs
with one id at once, one refused cleanly; Ctrl-C as one line, the run resumable; what a
resume refuses; unfinished runs hidden from queries and ``push`` unless asked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import evalkit
from evalkit.results.query import connect

EVALKIT = str(Path(sys.executable).with_name("evalkit"))
ARGS = ["+experiment=quickstart", "+source.batch_size=40", "runner.summary=false"]


def _env(fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "EVALKIT_FAULT"}
    return {**env, "EVALKIT_FAULT": fault} if fault else env


def _run(cwd: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EVALKIT, "run", *ARGS, *args], cwd=cwd, env=_env(fault),
                          capture_output=True, text=True, timeout=120)


def _manifest(cwd: Path, run_id: str) -> dict:
    return json.loads((cwd / "runs" / "quickstart" / run_id / "manifest.json").read_text())


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_an_existing_run_id_is_refused_in_one_line(tmp_path):
    assert _run(tmp_path, "runner.run_id=x").returncode == 0
    again = _run(tmp_path, "runner.run_id=x")
    assert again.returncode == 2
    line = _error_line(again)
    assert "run 'x' already exists" in line and "status ok" in line
    assert _manifest(tmp_path, "x")["status"] == "ok"  # untouched


def test_a_killed_run_is_refused_without_resume_and_named_so(tmp_path):
    killed = _run(tmp_path, "runner.run_id=k", fault="kill@batch_done#1")
    assert killed.returncode == -signal.SIGKILL
    assert _manifest(tmp_path, "k")["status"] == "running"
    again = _run(tmp_path, "runner.run_id=k")
    assert again.returncode == 2
    assert "--resume k" in _error_line(again)


def test_resume_refuses_a_finished_run_a_missing_one_and_a_changed_config(tmp_path):
    assert _run(tmp_path, "runner.run_id=done").returncode == 0
    finished = _run(tmp_path, "--resume", "done")
    assert finished.returncode == 2 and "finished (ok)" in _error_line(finished)
    missing = _run(tmp_path, "runner.resume=nope")
    assert missing.returncode == 2 and "no run 'nope'" in _error_line(missing)
    assert _run(tmp_path, "runner.run_id=k", fault="kill@batch_done#2").returncode == -9
    changed = _run(tmp_path, "--resume", "k", "judges.prompt_echo.threshold=0.2")
    assert changed.returncode == 2
    line = _error_line(changed)
    assert "judges.prompt_echo.threshold" in line and "0.2" in line
    other = _run(tmp_path, "--resume", "k", "runner.run_id=x")
    assert other.returncode == 2 and "runner.run_id" in _error_line(other)
    assert _run(tmp_path, "--resume", "k").returncode == 0
    assert _manifest(tmp_path, "k")["status"] == "ok"


def _wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.02)
    raise AssertionError("the first run never reached its stop point")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_two_runs_with_one_run_id_at_once_one_is_refused_cleanly(tmp_path):
    first = subprocess.Popen([EVALKIT, "run", *ARGS, "runner.run_id=same"], cwd=tmp_path,
                             env=_env("stop@batch_done#1"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _wait_stopped(first.pid)  # mid-run, holding the run
        second = _run(tmp_path, "runner.run_id=same")
        assert second.returncode == 2
        line = _error_line(second)
        assert "run 'same' is being written by another process" in line
        second_resume = _run(tmp_path, "--resume", "same")
        assert second_resume.returncode == 2
        assert "being written by another process" in _error_line(second_resume)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    manifest = _manifest(tmp_path, "same")
    assert manifest["status"] == "ok" and manifest["n_records"] == 160
    parts = sorted((tmp_path / "runs" / "quickstart" / "same" / "judgments").glob("*"))
    assert sum(pq.read_metadata(p).num_rows for p in parts) == manifest["n_judgments"]


def test_ctrl_c_prints_one_line_marks_the_run_interrupted_and_it_resumes(tmp_path):
    clean = _run(tmp_path, "runner.run_id=clean")
    assert clean.returncode == 0
    stopped = _run(tmp_path, "runner.run_id=c", fault="sigint@judgment_part#3")
    assert stopped.returncode == 130
    line = _error_line(stopped)
    assert "interrupted" in line and "--resume c" in line
    assert _manifest(tmp_path, "c")["status"] == "interrupted"
    con = connect(tmp_path / "runs")
    assert sorted(con.sql("SELECT run_id, status FROM runs").fetchall()) == \
        [("c", "interrupted"), ("clean", "ok")]
    assert con.sql("SELECT DISTINCT run_id FROM judgments").fetchall() == [("clean",)]
    assert _run(tmp_path, "--resume", "c").returncode == 0
    con = connect(tmp_path / "runs")
    assert con.sql("SELECT count(*) FROM judgments WHERE run_id = 'c'").fetchone()[0] == \
        _manifest(tmp_path, "clean")["n_judgments"]


def test_a_failed_run_is_failed_in_the_runs_table_and_hidden(tmp_path):
    bad = _run(tmp_path, "runner.run_id=f", fault="fail@metric_computed#2")
    assert bad.returncode != 0
    assert _manifest(tmp_path, "f")["status"] == "failed"
    con = connect(tmp_path / "runs")
    assert con.sql("SELECT status FROM runs").fetchall() == [("failed",)]
    assert con.sql("SELECT count(*) FROM records").fetchone()[0] == 0
    every = connect(tmp_path / "runs", include_unfinished=True)
    assert every.sql("SELECT count(*) FROM records").fetchone()[0] == 160
    public = evalkit.connect(str(tmp_path / "runs"))  # the Python API: the same rule
    assert public.sql("SELECT count(*) FROM records").fetchone()[0] == 0
    public = evalkit.connect(str(tmp_path / "runs"), include_unfinished=True)
    assert public.sql("SELECT count(*) FROM records").fetchone()[0] == 160


def test_query_and_push_see_finished_runs_unless_asked(tmp_path):
    assert _run(tmp_path, "runner.run_id=k", fault="kill@metrics_written").returncode == -9
    query = subprocess.run([EVALKIT, "query", "SELECT count(*) AS n FROM judgments",
                            "--format", "csv"], cwd=tmp_path, capture_output=True, text=True)
    assert query.returncode == 0 and query.stdout.split()[1] == "0", query.stderr
    everything = subprocess.run([EVALKIT, "query", "SELECT count(*) AS n FROM metrics",
                                 "--format", "csv", "--all-runs"], cwd=tmp_path,
                                capture_output=True, text=True)
    assert everything.returncode == 0 and everything.stdout.split()[1] != "0"
    push = subprocess.run([EVALKIT, "push", "k", "--to", "langfuse"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert push.returncode == 2
    assert "'interrupted'" in _error_line(push) and "--resume k" in push.stderr


def test_a_running_run_whose_process_is_gone_reads_as_interrupted(tmp_path):
    """A SIGKILL leaves the manifest saying ``running``; readers check the pid in the run's
    lock and list a run whose writer is gone as ``interrupted`` (nothing is written)."""
    from evalkit.results.runs import list_runs

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for run_id, pid in (("dead", gone), ("alive", str(os.getpid())), ("nolock", None)):
        run_dir = tmp_path / "runs" / "exp" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps(
            {"run_id": run_id, "experiment": "exp", "status": "running"}))
        if pid is not None:
            (run_dir / ".lock").write_text(pid)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    statuses = {d.name: s for d, s in list_runs(tmp_path / "runs")}
    assert statuses == {"dead": "interrupted", "alive": "running", "nolock": "interrupted"}
    con = connect(tmp_path / "runs")
    assert dict(con.sql("SELECT run_id, status FROM runs").fetchall()) == statuses
    con.close()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
