"""``hydra/launcher=submitit_slurm`` on a real Slurm cluster (slurmctld, slurmd, slurmdbd on
127.0.0.1, started by ``tests/scale/slurm_cluster.py``), as docs/scaling.md describes it: each
job of the sweep an ``sbatch`` job and its own run, stamped with the sweep's id; a failed job
fails alone and shows in the closing table; the judges' shared call limits hold across the
Slurm jobs; no secret reaches a job script, submitit's pickles or Slurm's logs; ``scancel``
of a job marks its run ``interrupted``.

Skipped when Slurm is not installed, except in CI (``CI=true`` or ``EVALKIT_REQUIRE_SLURM=1``,
set by ``.ci/run``, which installs it), where a missing Slurm fails the module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EVALKIT, run_cli, run_dirs

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer, Reply  # noqa: E402
from slurm_cluster import SlurmCluster, missing  # noqa: E402

pytestmark = pytest.mark.e2e

REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get(
    "EVALKIT_REQUIRE_SLURM") == "1"
KEY = "sk-slurmtest-5d2e8f1a9c7b3046"  # the judge's API key, in the launching shell only
PASSWORD = "pw-slurmtest-1b9e44c0d7"  # a credential inside a command-line api_base

EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]
experiment: onslurm
source:
  path: {data}
  limit: 8
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: {url}
    api_key_env: SLURMTEST_API_KEY
    cache: false
    concurrency: 2
    max_retries: 0
metrics:
  flagged: {{plugin: rate, judge: hallucination_llm}}
runner:
  runs_dir: {runs}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    why = missing()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"CI requires the Slurm launcher tests, but {why}")
        pytest.skip(f"SLURM LAUNCHER TESTS SKIPPED: {why}")
    c = SlurmCluster().start()
    try:
        yield c
    finally:
        c.stop()


def _project(cwd: Path, url: str) -> None:
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "tmp").mkdir()
    # absolute paths: a Slurm job starts in the submitting directory, but a site may not
    (cwd / "conf" / "experiment" / "onslurm.yaml").write_text(EXPERIMENT.format(
        url=url, data=cwd / "data.jsonl", runs=cwd / "runs"))
    rows = [{"id": f"r{i}", "input": f"question {i} about the build",
             "output": f"the build {i} is red", "context": f"build {i} went red on Tuesday"}
            for i in range(8)]
    (cwd / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _env(cluster: SlurmCluster, cwd: Path) -> dict[str, str]:
    return {**cluster.env, "SLURMTEST_API_KEY": KEY, "TMPDIR": str(cwd / "tmp"),
            "EVALKIT_CACHE_DIR": str(cwd / "cache")}


def _files_holding(root: Path, *secrets: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return found


def test_a_sweep_runs_as_slurm_jobs(tmp_path: Path, cluster: SlurmCluster) -> None:
    server = FakeLLMServer(latency=0.3).start()
    try:
        _project(tmp_path, server.url)
        base = server.url.replace("http://", f"http://judge:{PASSWORD}@")
        proc = run_cli(
            "run", "-m", "+experiment=onslurm", "metrics.flagged.threshold=0.2,abc,0.8",
            f"judges.hallucination_llm.api_base={base}", "hydra/launcher=submitit_slurm",
            "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=10",
            "runner.summary=false", cwd=tmp_path, check=False, env=_env(cluster, tmp_path))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out[-3000:]  # the bad job's own exit code
        assert "3 jobs, 1 failed" in proc.stdout and "job 1 failed" in proc.stdout, out[-3000:]
        dirs = run_dirs(tmp_path, "onslurm")
        manifests = [json.loads((d / "manifest.json").read_text()) for d in dirs]
        assert {m["status"] for m in manifests} == {"ok"}
        assert sorted(m["sweep_job"] for m in manifests) == [0, 2]
        assert manifests[0]["sweep_id"] and manifests[0]["sweep_id"] == manifests[1]["sweep_id"]
        rows = [json.loads(r) for r in run_cli(
            "query", "SELECT sweep_id, sweep_job FROM runs ORDER BY sweep_job", "--runs-dir",
            str(tmp_path / "runs"), "--format", "jsonl", cwd=tmp_path).stdout.splitlines()]
        assert [r["sweep_job"] for r in rows] == [0, 2]
        # each job ran as its own Slurm job, with its accounting record
        jobs = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State"],
                              env={**os.environ, **cluster.env}, capture_output=True,
                              text=True, timeout=60).stdout.split()
        assert len(jobs) >= 3 and all("COMPLETED" in j for j in jobs[-3:]), jobs

        # the key reached the jobs; both jobs' calls shared the endpoint's 2 slots
        assert len(server.requests) == 16
        assert {r["headers"].get("Authorization") for r in server.requests} == {
            f"Bearer {KEY}"}
        assert server.max_in_flight == 2
        # no secret in the runs, submitit's job folder (scripts, pickles, logs) or Slurm's
        held = _files_holding(tmp_path, KEY, PASSWORD)
        assert held == [], "\n".join(held)
        # Slurm keeps a job's environment (sbatch --export=ALL, how the key reaches the job)
        # in the controller's state directory, readable by SlurmUser only, until the job is
        # purged: there and nowhere else in the cluster's files (logs, spool, job scripts)
        held = _files_holding(cluster.root, KEY, PASSWORD)
        assert held and all(h.startswith(f"{cluster.root / 'state'}/") and
                            h.split(": ")[0].endswith("/environment") for h in held), held
        assert KEY not in out and PASSWORD not in out
    finally:
        server.stop()


def _slurm_job_of(pid: int) -> str | None:
    """``ARRAYJOB_TASK`` of the Slurm job running ``pid`` (an array task's own SLURM_JOB_ID
    may be the array's, which ``scancel`` would take as every task)."""
    try:
        env = dict(item.split(b"=", 1) for item in
                   Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
    except OSError:
        return None
    array, task = env.get(b"SLURM_ARRAY_JOB_ID"), env.get(b"SLURM_ARRAY_TASK_ID")
    return f"{array.decode()}_{task.decode()}" if array and task else None


def _pid_of_peer(port: int) -> int | None:
    from tests.scale.test_ray_launcher import _pid_of_peer as pid_of_peer

    return pid_of_peer(port)


def test_scancel_of_a_job_marks_its_run_interrupted(
        tmp_path: Path, cluster: SlurmCluster) -> None:
    # judge-b's job is cancelled (scancel: SIGTERM, the job marks its run); judge-c's
    # process is killed (SIGKILL, as by the OOM killer: no result at all); judge-a's runs on
    server = FakeLLMServer(latency=0.05).start()
    peers: dict[str, tuple[str, int]] = {}

    def plan(body: dict) -> Reply:
        model = body.get("model")
        if model in ("judge-b", "judge-c"):
            peers.setdefault(model, server.requests[-1]["peer"])
            return Reply(delay=6)
        return Reply()

    server.plan = plan
    env = {**os.environ, **cluster.env}
    try:
        _project(tmp_path, server.url)
        sweep = subprocess.Popen(
            [EVALKIT, "run", "-m", "+experiment=onslurm",
             "judges.hallucination_llm.model=openai/judge-a,openai/judge-b,openai/judge-c",
             "hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug",
             "runner.summary=false"], cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "COLUMNS": "200", **_env(cluster, tmp_path)})
        deadline = time.monotonic() + 120
        jobs: dict[str, tuple[int, str]] = {}
        while len(jobs) < 2 and time.monotonic() < deadline and sweep.poll() is None:
            for model, peer in list(peers.items()):
                pid = _pid_of_peer(peer[1])
                job = _slurm_job_of(pid) if pid else None
                if job and model not in jobs:
                    jobs[model] = pid, job
            time.sleep(0.2)
        assert len(jobs) == 2, f"the Slurm jobs were not found: {jobs}, {sweep.poll()}"
        subprocess.run(["scancel", jobs["judge-b"][1]], env=env, check=True, timeout=60)
        os.kill(jobs["judge-c"][0], signal.SIGKILL)
        out, _ = sweep.communicate(timeout=180)
        assert sweep.returncode == 130, out[-3000:]
        assert "3 jobs, 2 failed" in out and "job 1 interrupted" in out, out[-3000:]
        assert f"job 2 failed: Slurm job {jobs['judge-c'][1]} ended FAILED" in out, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        runs = {m["sweep_job"]: m for m in (json.loads((d / "manifest.json").read_text())
                                             for d in run_dirs(tmp_path, "onslurm"))}
        assert runs[0]["status"] == "ok"
        assert runs[1]["status"] == "interrupted"  # written by the job, readable anywhere
        assert runs[2]["status"] == "running", out[-3000:]  # killed: only its machine can tell
    finally:
        server.stop()


def test_in_ci_a_missing_slurm_fails_the_slurm_tests_instead_of_skipping(
        tmp_path: Path) -> None:
    assert "EVALKIT_REQUIRE_SLURM=1" in (Path(__file__).parents[2] / ".ci" / "run").read_text()
    for env, outcome in (({"CI": "true"}, "1 error"), ({"CI": ""}, "1 skipped")):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
             "-k", "runs_as_slurm_jobs"],
            env={**os.environ, "EVALKIT_SLURM_PATH": str(tmp_path), "EVALKIT_REQUIRE_SLURM": "",
                 **env},
            cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=300)
        assert outcome in proc.stdout, proc.stdout[-2000:]
        assert ("CI requires the Slurm launcher tests" in proc.stdout) == (outcome == "1 error")
