"""The runner's public surface: :func:`execute` runs a config and returns a :class:`RunResult`.
The run itself is in :mod:`evalkit.runner.run` (its lifecycle), ``judging``, ``metrics``,
``alerts`` and ``summary``."""

from evalkit.runner.alerts import evaluate_alerts
from evalkit.runner.result import RunResult
from evalkit.runner.run import execute, new_run_id

__all__ = ["RunResult", "evaluate_alerts", "execute", "new_run_id"]
