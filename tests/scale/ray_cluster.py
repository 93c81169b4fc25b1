"""A Ray cluster of two nodes on 127.0.0.1 for the Ray launcher's tests and
``bench/bench_launchers.py``, as a cluster of two machines would be: a head (``ray start
--head``) and a worker node (``ray start --address=...``), each with its own raylet, object
store, ports and temp dir (``TEMP/ray`` and ``TEMP/node2``: a task's node is told by the
temp dir on its worker's raylet's command line). Needs the ``ray`` extra; :func:`missing`
says what is absent."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"


def missing() -> str | None:
    """What keeps a Ray cluster (and ``hydra/launcher=ray``) from starting here, or None."""
    try:
        import hydra_plugins.hydra_ray_launcher  # noqa: F401
        import ray  # noqa: F401
    except ImportError as exc:
        return f"the ray extra is not installed ({exc}): pip install -e '.[ray]'"
    return None if RAY.exists() else f"no {RAY}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_env(drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for the cluster's nodes and for the commands that use it (less the
    names in ``drop``): no token file under ~/.ray, no usage report, and no RAY_ADDRESS
    (it would win over the cluster's own address)."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    return env


class RayCluster:
    """Start with :meth:`start`, stop with :meth:`stop` (every process of both nodes);
    :attr:`address` is the head's ``host:port``, :attr:`temp` the nodes' temp dirs' parent.
    ``env`` is the nodes' environment (their workers inherit it)."""

    def __init__(self, cpus_per_node: int = 1, env: dict[str, str] | None = None) -> None:
        self.cpus = cpus_per_node
        self.env = env if env is not None else ray_env()
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # short, so under /tmp whatever TMPDIR is (a test's own is nested): Ray's socket
        # paths live under it, and a Unix socket path has ~107 bytes
        self.temp = Path(tempfile.mkdtemp(prefix="evk-ray-", dir="/tmp"))
        self._nodes: list[subprocess.Popen] = []

    def _wait(self, what: str, proc: subprocess.Popen, log: Path, ready,
              timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited {proc.returncode}: "
                                   f"{log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")
            time.sleep(0.2)

    def nodes_up(self) -> int:
        status = subprocess.run([str(RAY), "status", f"--address={self.address}"],
                                env=self.env, capture_output=True, text=True, timeout=60)
        return status.stdout.count(" node_")

    def start(self) -> RayCluster:
        # a small object store: a container's /dev/shm is often 64 MB
        common = ["--block", f"--num-cpus={self.cpus}", "--node-ip-address=127.0.0.1",
                  "--object-store-memory=78643200"]
        try:
            for name, args in (
                    ("head", [f"--port={self.port}", "--head", "--include-dashboard=false",
                              "--disable-usage-stats", f"--temp-dir={self.temp / 'ray'}"]),
                    ("node2", [f"--address={self.address}", f"--temp-dir={self.temp / 'node2'}",
                               # (the head's agent holds the default port)
                               "--dashboard-agent-listen-port=0"])):
                log = self.temp / f"{name}.log"
                with log.open("wb") as out:
                    self._nodes.append(subprocess.Popen(
                        [str(RAY), "start", *common, *args], env=self.env, stdout=out,
                        stderr=subprocess.STDOUT, start_new_session=True))
                if name == "head":
                    def listening() -> bool:
                        with socket.socket() as s:
                            return s.connect_ex(("127.0.0.1", self.port)) == 0
                    self._wait("the Ray head", self._nodes[-1], log, listening)
                else:
                    self._wait("the second Ray node", self._nodes[-1], log,
                               lambda: self.nodes_up() >= 2, timeout=90)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in reversed(self._nodes):  # `ray start --block` stops what it started
            node.send_signal(signal.SIGTERM)
            try:
                node.wait(30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(node.pid, signal.SIGKILL)  # anything left of its session (workers)
            except ProcessLookupError:
                pass
        self._nodes = []
        shutil.rmtree(self.temp, ignore_errors=True)
