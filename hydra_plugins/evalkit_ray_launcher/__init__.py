"""``hydra/launcher=ray`` for evalkit: each job of a sweep runs as a Ray task, through
Hydra's Ray launcher (``pip install "evalkit[ray]"``: hydra-ray-launcher), with what an
evalkit sweep needs of it (docs/scaling.md, "Ray"):

- A Ray worker is a process of the cluster, not of the launching shell: it inherits none of
  the shell's variables. Each task carries the variables its job reads
  (``evalkit.runner.sweep.job_env``: the sweep's id, status file and limits directory, secret
  command-line values, API keys) and the launching directory, in its own arguments (held in
  Ray's memory while the task runs). They never go into the job's ``runtime_env``, which Ray
  keeps for the job's life and shows on its dashboard, nor into any file.
- ``ray.init.address`` (an existing cluster): Hydra's launcher 1.2.2 always passes
  ``object_store_memory``, which Ray 2.x refuses when it connects to a running cluster.
- A job whose task dies (its worker killed, a node lost) fails alone: the launcher waits for
  every task, notes the dead one in the sweep's status file and returns the others' runs.
- Each job's end (status, exit code, run) comes back as the task's result and is noted in the
  launching machine's status file, so the closing table is whole when jobs ran on other nodes.

Hydra loads every module of ``hydra_plugins`` on each ``evalkit run``: this one imports Ray
and the Ray launcher only when a sweep uses it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = ["RayLauncher"]

log = logging.getLogger(__name__)
# what Hydra's Ray launcher gives a Ray it starts on this machine (a small object store)
_LOCAL_OBJECT_STORE = 78643200


class _InLaunchingEnv:
    """A job's task function, run with the launching process's variables and directory
    (restored afterwards: a Ray worker runs the tasks of the sweep one after another)."""

    def __init__(self, task_function: TaskFunction, env: dict[str, str], cwd: str) -> None:
        self.task_function = task_function
        self.env = env
        self.cwd = cwd

    def __call__(self, cfg: DictConfig) -> Any:
        saved = {k: os.environ.get(k) for k in self.env}
        here = os.getcwd()
        os.environ.update(self.env)
        if os.path.isdir(self.cwd):  # relative paths (runs_dir, data) as in the shell
            os.chdir(self.cwd)
        try:
            return self.task_function(cfg)
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@contextmanager
def _entrypoint_as_argv() -> Iterator[None]:
    """Ray records the driver's command line as the job's entrypoint (its job table and
    dashboard), read from the process (``/proc/self/cmdline``): a secret typed on it would
    be kept there. evalkit's ``sys.argv`` holds the command line with secret values moved to
    the environment (``evalkit.redact.hide_secret_overrides``): that one is recorded."""
    import ray._private.utils as ray_utils

    from evalkit.redact import mask

    original = getattr(ray_utils, "get_entrypoint_name", None)
    if original is None:  # (a Ray without it records no command line)
        yield
        return
    argv = ["evalkit", "run", *sys.argv[1:]] if sys.argv[:1] == ["evalkit run"] else sys.argv
    shown = mask(subprocess.list2cmdline(argv))
    ray_utils.get_entrypoint_name = lambda: shown
    try:
        yield
    finally:
        ray_utils.get_entrypoint_name = original


def _unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing listens at a ``host:port`` cluster address (None: something does, or the
    address is another form: ``auto``, ``local``, ``ray://``, left to Ray)."""
    import socket

    host, colon, port = address.rpartition(":")
    if not colon or "://" in address or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


class RayLauncher(Launcher):
    def __init__(self, ray: DictConfig) -> None:
        self.ray_cfg = ray
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        try:
            import ray
            from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray
        except ImportError as exc:
            print(f"evalkit: error: hydra/launcher=ray needs Ray ({exc}): "
                  'pip install "evalkit[ray]"', file=sys.stderr)
            sys.exit(2)
        from hydra.core.singleton import Singleton
        from hydra.core.utils import configure_log, filter_overrides, setup_globals

        from evalkit.redact import mask
        from evalkit.runner.sweep import job_env, note

        assert self.config is not None and self.hydra_context is not None
        assert self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        self._start_ray(ray)
        log.info(f"Ray launcher: {len(job_overrides)} jobs")

        remote = OmegaConf.create({k: v for k, v in OmegaConf.to_container(
            self.ray_cfg.remote, resolve=True).items() if v is not None})  # type: ignore[union-attr]
        refs: list[tuple[int, list[str], Any]] = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            sweep_config = self.hydra_context.config_loader.load_sweep_config(
                self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"ray_job_{idx}"  # (set by the scheduler, if any)
                sweep_config.hydra.job.num = idx
            task = _InLaunchingEnv(self.task_function, job_env(sweep_config),
                                   str(sweep_config.hydra.runtime.cwd))
            refs.append((idx, list(overrides), launch_job_on_ray(
                self.hydra_context, remote, sweep_config, task,
                Singleton.get_state())))

        returns = []
        for idx, overrides, ref in refs:  # every task, whatever became of the others
            try:
                ret = ray.get(ref)
            except Exception as exc:  # the task died: its job failed, the others go on
                why = (str(exc).strip().splitlines() or [""])[-1]
                note({"job": idx, "event": "end", "status": "failed", "exit": 1,
                      "overrides": [mask(o) for o in overrides],
                      "error": mask(f"its Ray task died: {type(exc).__name__}: {why}")})
                ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED,
                                _return_value=None)
            else:
                if ret.status == JobStatus.COMPLETED and isinstance(ret.return_value, dict):
                    # the job's end, also when its node is not this one
                    note({"overrides": [mask(o) for o in overrides], **ret.return_value})
            returns.append(ret)
        return returns

    def _start_ray(self, ray: Any) -> None:
        if ray.is_initialized():
            return
        init: dict[str, Any] = OmegaConf.to_container(self.ray_cfg.init, resolve=True)  # type: ignore[assignment]
        init = {k: v for k, v in init.items() if v is not None}
        if not init.get("address") and not os.environ.get("RAY_ADDRESS"):
            init.setdefault("object_store_memory", _LOCAL_OBJECT_STORE)  # a Ray started here
        init.setdefault("logging_level", logging.WARNING)
        address = init.get("address") or os.environ.get("RAY_ADDRESS")
        refused = _unreachable(address) if address else None
        if refused:  # (ray.init retries such an address for ever)
            print(f"evalkit: error: hydra.launcher.ray.init.address={address}: no Ray "
                  f"answers there ({refused}); start the cluster (`ray start --head`) or fix "
                  "the address (`ray status --address=...` checks it)", file=sys.stderr)
            sys.exit(2)
        try:
            with _entrypoint_as_argv():
                ray.init(**init)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            where = init.get("address") or os.environ.get("RAY_ADDRESS") or "a new local Ray"
            why = (str(exc).strip().splitlines() or [repr(exc)])[0]
            print(f"evalkit: error: hydra.launcher.ray.init: cannot start or reach Ray at "
                  f"{where}: {why} (start the cluster with `ray start --head`, or fix "
                  "hydra.launcher.ray.init.address)", file=sys.stderr)
            sys.exit(2)
