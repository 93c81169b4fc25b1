"""What a plugin knows about the run it belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunContext"]


@dataclass(frozen=True)
class RunContext:
    """The run a plugin works for: its ids and directories. What a source reads (records,
    rejects, imported scores) it yields (:class:`evalkit.plugin.Source`); nothing is written
    into the context."""

    run_id: str
    experiment: str
    run_dir: Path  # runs/<experiment>/<run_id>: the run's files
    runs_dir: Path  # every run (a source's resume state lives here)
    cache_dir: Path  # the judge response cache
    dry_run: bool = False  # judges estimate and call no model
