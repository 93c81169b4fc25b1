"""``hydra/launcher=submitit_slurm`` and ``submitit_local`` for evalkit: Hydra's submitit
launchers (``pip install "evalkit[submitit]"``), with what an evalkit sweep needs of them
(docs/scaling.md, "Slurm"):

- Hydra's launcher collects the jobs' results in order and raises at the first job that
  produced none (``scancel``, a node lost, a job killed at its time limit or out of memory),
  while the jobs after it still run: a traceback, and a sweep whose closing table waits on
  jobs nobody collects. Here every job is collected; one without a result fails alone, noted
  in the sweep's status file with what Slurm says became of it (``CANCELLED``: interrupted,
  exit 130; ``TIMEOUT``, ``OUT_OF_MEMORY``, ``NODE_FAIL``…: failed, exit 1).
- Without the extra installed, ``evalkit run`` says so in one line before Hydra starts
  (``evalkit.runner.app.missing_launcher``).

Hydra loads every module of ``hydra_plugins`` on each ``evalkit run``: this one imports
submitit only when a sweep uses it."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

__all__ = ["LocalLauncher", "SlurmLauncher"]

log = logging.getLogger(__name__)

# a job Slurm ended before it wrote its result: these states mean somebody stopped it
_STOPPED = ("CANCELLED", "PREEMPTED")


def _inner(executor: str, params: dict[str, Any]) -> Launcher:
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher

    cls = submitit_launcher.SlurmLauncher if executor == "slurm" else \
        submitit_launcher.LocalLauncher
    return cls(**params)


def _state(job: Any) -> str:
    try:
        return str(job.state or "UNKNOWN")
    except Exception:  # (the scheduler could not say: sacct failing, say)
        return "UNKNOWN"


@contextmanager
def _every_job_collected(job_overrides: Sequence[Sequence[str]],
                         initial_job_idx: int) -> Iterator[None]:
    """While Hydra's launcher collects its jobs (``Job.results``, one job after another, in
    the sweep's order), a job that produced no result becomes a failed job's return instead
    of an exception that abandons the rest."""
    from submitit.core import core

    from evalkit.redact import mask
    from evalkit.runner.sweep import note

    original = core.Job.results
    collected = iter(range(initial_job_idx, initial_job_idx + len(job_overrides)))

    def results(job: Any) -> list[Any]:
        idx = next(collected, None)
        try:
            return original(job)
        except Exception as exc:
            if idx is None:
                raise
            state = _state(job)
            stopped = state.split()[0] in _STOPPED
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            note({"job": idx, "event": "end", "status": "failed", "exit": 130 if stopped else 1,
                  "overrides": [mask(o) for o in job_overrides[idx - initial_job_idx]],
                  "error": mask(f"Slurm job {job.job_id} ended {state} without a result"
                                if state != "UNKNOWN" else why)})
            return [JobReturn(overrides=list(job_overrides[idx - initial_job_idx]),
                              status=JobStatus.COMPLETED, _return_value=None)]

    core.Job.results = results  # type: ignore[method-assign]
    try:
        yield
    finally:
        core.Job.results = original  # type: ignore[method-assign]


class _SubmititLauncher(Launcher):
    _EXECUTOR = ""

    def __init__(self, **params: Any) -> None:
        self.inner = _inner(self._EXECUTOR, params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.inner.setup(hydra_context=hydra_context, task_function=task_function,
                         config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        with _every_job_collected(job_overrides, initial_job_idx):
            return self.inner.launch(job_overrides, initial_job_idx)


class SlurmLauncher(_SubmititLauncher):
    _EXECUTOR = "slurm"


class LocalLauncher(_SubmititLauncher):
    _EXECUTOR = "local"
