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
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EVALKIT, run_cli, run_dirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer  # noqa: E402

pytestmark = pytest.mark.e2e  # runs evalkit end to end

REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get(
    "EVALKIT_REQUIRE_RAY") == "1"
RAY = Path(sys.executable).parent / "ray"
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


def _ray_missing() -> str | None:
    try:
        import hydra_plugins.hydra_ray_launcher  # noqa: F401
        import ray  # noqa: F401
    except ImportError as exc:
        return f"the ray extra is not installed ({exc}): pip install -e '.[ray]'"
    return None if RAY.exists() else f"no {RAY}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    """What the Ray head (and so its workers) and evalkit see: no judge key in the head's."""
    env = {k: v for k, v in os.environ.items() if k != "RAYTEST_API_KEY"}
    # no token file under ~/.ray, no usage report; RAY_ADDRESS would win over the test's head
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    return env


def _wait_for(what: str, proc: subprocess.Popen, log: Path, ready, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"{what} exited {proc.returncode}: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(0.2)


def _nodes_up(address: str) -> int:
    status = subprocess.run([str(RAY), "status", f"--address={address}"], env=_env(),
                            capture_output=True, text=True, timeout=60)
    return status.stdout.count(" node_")


@pytest.fixture(scope="module")
def ray_head() -> Iterator[tuple[str, Path]]:
    """``address, temp dir`` of a two-node Ray cluster on 127.0.0.1, as a cluster of two
    machines would be: a head and a worker node, 1 CPU each, each with its own raylet,
    object store, ports and temp dir (``TEMP/ray``, ``TEMP/node2``: a task's node is told
    by its worker's raylet). Shared by the module's tests; stopped with every process."""
    missing = _ray_missing()
    if missing is not None:
        if REQUIRED:
            pytest.fail(f"CI requires the Ray launcher tests, but {missing}")
        pytest.skip(f"RAY LAUNCHER TESTS SKIPPED: {missing}")
    port = _free_port()
    # short, so under /tmp whatever TMPDIR is (the suite's own is nested): Ray's socket paths
    # live under it, and a Unix socket path has ~107 bytes
    temp = Path(tempfile.mkdtemp(prefix="evk-ray-", dir="/tmp"))
    address = f"127.0.0.1:{port}"
    # a small object store: a container's /dev/shm is often 64 MB
    common = ["--block", "--num-cpus=1", "--node-ip-address=127.0.0.1",
              "--object-store-memory=78643200"]
    nodes: list[subprocess.Popen] = []
    try:
        for name, args in (("head", [f"--port={port}", "--head", "--include-dashboard=false",
                                     "--disable-usage-stats", f"--temp-dir={temp / 'ray'}"]),
                           ("node2", [f"--address={address}", f"--temp-dir={temp / 'node2'}",
                                      # (the head's agent holds the default port)
                                      "--dashboard-agent-listen-port=0"])):
            log = temp / f"{name}.log"
            with log.open("wb") as out:
                nodes.append(subprocess.Popen([str(RAY), "start", *common, *args], env=_env(),
                                              stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True))
            if name == "head":
                def listening() -> bool:
                    with socket.socket() as s:
                        return s.connect_ex(("127.0.0.1", port)) == 0
                _wait_for("the Ray head", nodes[-1], log, listening)
            else:
                _wait_for("the second Ray node", nodes[-1], log,
                          lambda: _nodes_up(address) >= 2, timeout=90)
        yield address, temp
    finally:
        for node in reversed(nodes):  # `ray start --block` stops what it started
            node.send_signal(signal.SIGTERM)
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(node.pid, signal.SIGKILL)  # anything left of its session (workers)
            except ProcessLookupError:
                pass
        import shutil

        shutil.rmtree(temp, ignore_errors=True)


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
        return Reply()

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
         "hydra/launcher=ray", f"hydra.launcher.ray.init.address=127.0.0.1:{_free_port()}",
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
