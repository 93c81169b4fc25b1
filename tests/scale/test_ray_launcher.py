"""``hydra/launcher=ray`` (``pip install "evalkit[ray]"``): the jobs of a sweep run as Ray
tasks on a Ray cluster the test starts on this machine (``ray start --head``), as on an
existing cluster: each job its own run, the sweep's closing table and exit code, the judges'
shared limits, and the variables the jobs read (the sweep's, the secrets) reaching Ray's
workers, which do not inherit the launching shell's environment, without landing in a file
or in Ray's job config.

Skipped when the ``ray`` extra is not installed, except in CI (``CI=true`` or
``EVALKIT_REQUIRE_RAY=1``, set by ``.ci/run``), where a missing Ray fails the module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EVALKIT, run_cli, run_dirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer  # noqa: E402

from tests.scale.ray_cluster import RayCluster, free_port, ray_env  # noqa: E402
from tests.scale.ray_cluster import missing as _ray_missing  # noqa: E402

pytestmark = pytest.mark.e2e  # runs evalkit end to end

REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get(
    "EVALKIT_REQUIRE_RAY") == "1"
KEY = "sk-raytest-4c1f9a7e2b8d6035"  # the judge's API key, in the launching shell only
PASSWORD = "pw-raytest-77d0c3a95e"  # a credential inside a command-line api_base

EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]
experiment: onray
source:
  path: data.jsonl
  limit: 12
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: {url}
    api_key_env: RAYTEST_API_KEY
    cache: false
    concurrency: 2
    max_retries: 0
metrics:
  flagged: {{plugin: rate, judge: hallucination_llm}}
"""


def _env() -> dict[str, str]:
    """What the Ray nodes (and so their workers) and evalkit see: no judge key in the nodes'."""
    return ray_env(drop=("RAYTEST_API_KEY",))


@pytest.fixture(scope="module")
def ray_head() -> Iterator[tuple[str, Path]]:
    """``address, temp dir`` of a two-node Ray cluster on 127.0.0.1 (``ray_cluster.py``),
    1 CPU a node. Shared by the module's tests; stopped with every process."""
    why = _ray_missing()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"CI requires the Ray launcher tests, but {why}")
        pytest.skip(f"RAY LAUNCHER TESTS SKIPPED: {why}")
    cluster = RayCluster(cpus_per_node=1, env=_env()).start()
    try:
        yield cluster.address, cluster.temp
    finally:
        cluster.stop()


def _node_of(pid: int | None) -> str | None:
    """``ray`` or ``node2``: the node whose raylet started worker ``pid``."""
    try:
        ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        raylet = Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError, TypeError):
        return None
    return "node2" if "/node2/" in raylet else "ray" if "/ray/" in raylet else None


def _project(cwd: Path, url: str) -> None:
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "tmp").mkdir()
    (cwd / "conf" / "experiment" / "onray.yaml").write_text(EXPERIMENT.format(url=url))
    rows = [{"id": f"r{i}", "input": f"question {i} about the build",
             "output": f"the build {i} is red", "context": f"build {i} went red on Tuesday"}
            for i in range(12)]
    (cwd / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


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


def test_a_sweep_runs_as_ray_tasks_with_the_sweeps_environment(
        tmp_path: Path, ray_head: tuple[str, Path]) -> None:
    from fake_llm_server import Reply

    address, ray_temp = ray_head
    server = FakeLLMServer(latency=0.15).start()
    nodes: set[str | None] = set()

    def plan(body: dict) -> Reply:  # which node each call came from
        peer = server.requests[-1]["peer"]
        nodes.add(_node_of(_pid_of_peer(peer[1])) if peer else None)
        # until a call came from each node, a job's calls are slow: the first good job holds
        # its node's one CPU until the other good job has started, which it can then only do
        # on the other node (else, on a loaded host, the bad job's quick end could let both
        # good jobs run one after the other on the head)
        return Reply(delay=None if nodes >= {"ray", "node2"} else 2.0)

    server.plan = plan
    try:
        _project(tmp_path, server.url)
        base = server.url.replace("http://", f"http://judge:{PASSWORD}@")
        proc = run_cli(
            "run", "-m", "+experiment=onray", "metrics.flagged.threshold=0.2,abc,0.8",
            f"judges.hallucination_llm.api_base={base}",
            "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
            "runner.summary=false", cwd=tmp_path, check=False,
            env={**_env(), "COLUMNS": "200", "RAYTEST_API_KEY": KEY,
                 "TMPDIR": str(tmp_path / "tmp"),
                 "EVALKIT_CACHE_DIR": str(tmp_path / "cache")})
        out = proc.stdout + proc.stderr
        # the bad job's own exit code (a config error): the sweep says which job failed
        assert proc.returncode == 2, out[-3000:]
        assert "3 jobs, 1 failed" in proc.stdout and "job 1 failed" in proc.stdout, out[-3000:]
        assert "flagged" in proc.stdout and "[" in proc.stdout  # headline metrics with CIs
        dirs = run_dirs(tmp_path, "onray")
        assert len(dirs) == 2  # jobs 0 and 2 both finished, in the launching directory
        manifests = [json.loads((d / "manifest.json").read_text()) for d in dirs]
        assert {m["status"] for m in manifests} == {"ok"}
        assert sorted(m["sweep_job"] for m in manifests) == [0, 2]
        rows = [json.loads(r) for r in run_cli(
            "query", "SELECT sweep_id, sweep_job FROM runs ORDER BY sweep_job",
            "--format", "jsonl", cwd=tmp_path).stdout.splitlines()]
        assert [r["sweep_job"] for r in rows] == [0, 2]
        assert rows[0]["sweep_id"] and rows[0]["sweep_id"] == rows[1]["sweep_id"]
        assert rows[0]["sweep_id"] == manifests[0]["sweep_id"]

        # the secrets reached the Ray workers (the head never had the key) ...
        assert len(server.requests) == 24
        # ... on both nodes (1 CPU each: the two jobs ran side by side, one on each)
        assert nodes == {"ray", "node2"}, nodes
        auth = {r["headers"].get("Authorization") for r in server.requests}
        assert auth == {f"Bearer {KEY}"}, auth
        # ... the limits dir too: 2 jobs at once on 2 nodes, each would keep 2 in flight
        assert server.max_in_flight == 2
        # ... and no secret in a run, the sweep's files, Ray's session (its logs, the jobs'
        # output) or the job's config Ray keeps (its runtime_env)
        assert _files_holding(tmp_path, KEY, PASSWORD) == []
        assert _files_holding(ray_temp, KEY, PASSWORD) == []
        assert KEY not in out and PASSWORD not in out
        jobs = subprocess.run(
            [sys.executable, "-c", "import json, ray\n"
             f"ray.init(address={address!r}, logging_level='ERROR')\n"
             "from ray._private.state import state\n"
             "from ray.core.generated import gcs_pb2\n"
             "accessor = state._connect_and_get_accessor() if hasattr(\n"
             "    state, '_connect_and_get_accessor') else (  # (Ray before 2.5x)\n"
             "    state._check_connected() or state.global_state_accessor)\n"
             "table = accessor.get_job_table(\n"
             "    skip_submission_job_info_field=False, skip_is_running_tasks_field=True)\n"
             "print(json.dumps([str(gcs_pb2.JobTableData.FromString(j)) for j in table]))"],
            env=_env(), capture_output=True, text=True, timeout=120)
        assert jobs.returncode == 0, jobs.stderr[-2000:]
        assert "entrypoint" in jobs.stdout and "onray" in jobs.stdout, jobs.stdout[-3000:]
        # (the job's entrypoint, the driver's command line, shows the secret as hidden)
        assert PASSWORD not in jobs.stdout and "EVALKIT_SECRET_OVERRIDE" in jobs.stdout
        assert KEY not in jobs.stdout
    finally:
        server.stop()


def test_without_the_ray_extra_the_launcher_says_what_to_install(tmp_path: Path) -> None:
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    proc = run_cli("run", "-m", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5,0.9",
                   "hydra/launcher=ray", "runner.summary=false", cwd=tmp_path, check=False,
                   env={"PYTHONPATH": str(tmp_path / "noray")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'pip install "evalkit[ray]"' in proc.stderr
    assert "Traceback" not in proc.stderr and "validated against" not in proc.stderr
    assert run_dirs(tmp_path, "quickstart") == []


def _pid_of_peer(port: int) -> int | None:
    """The process holding the TCP connection whose local port is ``port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in {f"socket:[{i}]" for i in inodes}:
                    return int(proc.name)
        except OSError:
            continue
    return None


def test_a_job_whose_ray_worker_dies_fails_alone(
        tmp_path: Path, ray_head: tuple[str, Path]) -> None:
    from fake_llm_server import Reply

    address, _ = ray_head
    server = FakeLLMServer(latency=0.05).start()
    killed: list[tuple[int, str]] = []

    def plan(body: dict) -> Reply:
        # the first call from the second node: its Ray worker is killed (SIGKILL, as when a
        # machine of the cluster goes) while the job on the head runs on
        if not killed:
            peer = server.requests[-1]["peer"]  # (this request: appended just before)
            pid = _pid_of_peer(peer[1]) if peer else None
            if pid is not None and pid != os.getpid() and _node_of(pid) == "node2":
                killed.append((pid, str(body.get("model"))))
                os.kill(pid, signal.SIGKILL)
        return Reply()

    server.plan = plan
    try:
        _project(tmp_path, server.url)
        proc = run_cli(
            "run", "-m", "+experiment=onray",
            "judges.hallucination_llm.model=openai/judge-a,openai/judge-b,openai/judge-c",
            "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
            "runner.summary=false", cwd=tmp_path, check=False,
            env={**_env(), "COLUMNS": "200", "RAYTEST_API_KEY": KEY,
                 "TMPDIR": str(tmp_path / "tmp"),
                 "EVALKIT_CACHE_DIR": str(tmp_path / "cache")})
        assert killed, "no worker on the second node was killed"
        dead = ["judge-a", "judge-b", "judge-c"].index(killed[0][1])
        assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
        assert "3 jobs, 1 failed" in proc.stdout and f"job {dead} failed" in proc.stdout
        assert "Ray task died" in proc.stdout
        runs = [json.loads((d / "manifest.json").read_text())
                for d in run_dirs(tmp_path, "onray")]
        ok = sorted(m["sweep_job"] for m in runs if m["status"] == "ok")
        # the others ran to their end, each once (no retried job), on either node
        assert ok == sorted({0, 1, 2} - {dead})
        assert len(runs) == 3  # and the dead job's run, never a second one
    finally:
        server.stop()


def test_a_cluster_address_where_no_ray_listens_is_one_error_line(tmp_path: Path) -> None:
    if _ray_missing() is not None:
        pytest.skip("the ray extra is not installed")  # (the CI test above fails then)
    # (ray.init itself waits for ever: a bounded wait here)
    proc = subprocess.run(
        [EVALKIT, "run", "-m", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5,0.9",
         "hydra/launcher=ray", f"hydra.launcher.ray.init.address=127.0.0.1:{free_port()}",
         "runner.summary=false"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
        timeout=90)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "hydra.launcher.ray.init.address=127.0.0.1:" in proc.stderr
    assert "no Ray answers there" in proc.stderr and "Traceback" not in proc.stderr
    assert run_dirs(tmp_path, "quickstart") == []


def test_in_ci_a_missing_ray_fails_the_ray_tests_instead_of_skipping(tmp_path: Path) -> None:
    assert "EVALKIT_REQUIRE_RAY=1" in (Path(__file__).parents[2] / ".ci" / "run").read_text()
    fake = tmp_path / "noray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    for env, outcome in (({"CI": "true"}, "1 error"), ({"CI": ""}, "1 skipped")):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
             "-k", "sweep_runs_as_ray_tasks"],
            env={**os.environ, "PYTHONPATH": str(tmp_path / "noray"), "EVALKIT_REQUIRE_RAY": "",
                 **env}, cwd=Path(__file__).parents[2], capture_output=True, text=True,
            timeout=300)
        assert outcome in proc.stdout, proc.stdout[-2000:]
        in_ci = outcome == "1 error"
        assert ("CI requires the Ray launcher tests" in proc.stdout) == in_ci
        assert (proc.returncode != 0) == in_ci  # the suite fails in CI, passes elsewhere
