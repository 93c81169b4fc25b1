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


@pytest.fixture(scope="module")
def ray_head() -> Iterator[tuple[str, Path]]:
    """``address, temp dir`` of a Ray head on 127.0.0.1 (2 CPUs), shared by the module's
    tests; stopped with every process it started."""
    missing = _ray_missing()
    if missing is not None:
        if REQUIRED:
            pytest.fail(f"CI requires the Ray launcher tests, but {missing}")
        pytest.skip(f"RAY LAUNCHER TESTS SKIPPED: {missing}")
    port = _free_port()
    # short: Ray's socket paths live under it (a Unix socket path has ~107 bytes)
    temp = Path(tempfile.mkdtemp(prefix="evk-ray-"))
    log = (temp / "head.log").open("wb")
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
         # a small object store: a container's /dev/shm is often 64 MB
         "--object-store-memory=78643200",
         f"--temp-dir={temp / 'ray'}"],
        env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if head.poll() is not None:
                pytest.fail(f"ray start exited {head.returncode}: "
                            f"{(temp / 'head.log').read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail("the Ray head did not listen within 60 s")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}", temp / "ray"
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # anything left of its session (workers)
        except ProcessLookupError:
            pass
        log.close()
        import shutil

        shutil.rmtree(temp, ignore_errors=True)


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
    address, ray_temp = ray_head
    server = FakeLLMServer(latency=0.15).start()
    try:
        _project(tmp_path, server.url)
        base = server.url.replace("http://", f"http://judge:{PASSWORD}@")
        proc = run_cli(
            "run", "-m", "+experiment=onray", "metrics.flagged.threshold=0.2,abc,0.8",
            f"judges.hallucination_llm.api_base={base}",
            "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
            "runner.summary=false", cwd=tmp_path, check=False,
            env={**_env(), "RAYTEST_API_KEY": KEY, "TMPDIR": str(tmp_path / "tmp"),
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
        auth = {r["headers"].get("Authorization") for r in server.requests}
        assert auth == {f"Bearer {KEY}"}, auth
        # ... the limits dir too: 2 jobs at once on 2 CPUs, each would keep 2 in flight
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
    killed: list[int] = []

    def plan(body: dict) -> Reply:
        # judge-b's first call: its Ray worker is killed (SIGKILL) while judge-a's runs on
        if body.get("model") == "judge-b" and not killed:
            peer = server.requests[-1]["peer"]  # (this request: appended just before)
            pid = _pid_of_peer(peer[1]) if peer else None
            if pid is not None and pid != os.getpid():
                killed.append(pid)
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
            env={**_env(), "RAYTEST_API_KEY": KEY, "TMPDIR": str(tmp_path / "tmp"),
                 "EVALKIT_CACHE_DIR": str(tmp_path / "cache")})
        assert killed, "no worker was killed"
        assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
        assert "3 jobs, 1 failed" in proc.stdout and "job 1 failed" in proc.stdout
        assert "Ray task died" in proc.stdout
        runs = [json.loads((d / "manifest.json").read_text())
                for d in run_dirs(tmp_path, "onray")]
        ok = sorted(m["sweep_job"] for m in runs if m["status"] == "ok")
        assert ok == [0, 2]  # the others ran to their end, each once (no retried job)
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
