"""evalkit: evaluate LLM applications from declarative Hydra configs.

The public Python surface is small: :func:`run` runs an experiment and :func:`open_run` opens a
finished one (:class:`evalkit.api.Run`: its tables as Arrow or pandas, a query joined with your
own data); :func:`connect` opens DuckDB over a runs directory; the plugin contracts live in
:mod:`evalkit.plugin`."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["connect", "run", "open_run", "Run", "__version__"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from evalkit.api import Run
    from evalkit.results.query import ReadOnlyConnection


def connect(runs_dir: str = "runs", run: str | None = None,
            include_unfinished: bool = False, *, memory_limit: str | None = None,
            timeout: float | None = None) -> ReadOnlyConnection:
    """A read-only DuckDB connection with views ``runs``, ``records``, ``judgments``,
    ``metrics``, ``alerts`` and ``rejects`` over every run under ``runs_dir``:
    ``connect("runs").sql("SELECT ...").df()``. It runs one plain read per call, can read
    nothing outside ``runs_dir`` and can write nothing (see docs/trust.md). ``run`` (an id,
    a run directory or ``latest``) makes the views hold that run only. The views hold the
    rows of finished (``ok``) runs only unless ``include_unfinished`` (see docs/runs.md);
    ``runs`` lists every run with its ``status``. A runs directory that does not exist is an
    error, not empty views. ``runs_dir`` may be a URL (``s3://bucket/prefix``).
    ``memory_limit`` (``"2GB"``) and ``timeout`` (seconds) bound each query; the defaults
    come from ``EVALKIT_QUERY_MEMORY_LIMIT`` and ``EVALKIT_QUERY_TIMEOUT``."""
    from pathlib import Path

    from evalkit.errors import QueryError
    from evalkit.results.query import ReadOnlyConnection
    from evalkit.results.query import connect as _connect
    from evalkit.results.sandbox import Limits
    from evalkit.results.storage import is_remote

    limits = Limits.resolve(memory_limit, timeout, "connect")
    if is_remote(runs_dir):  # object storage (s3://...): see docs/runs.md
        return ReadOnlyConnection(_connect(runs_dir, run=run, lazy=True,
                                           include_unfinished=include_unfinished,
                                           limits=limits))
    if not Path(runs_dir).is_dir():
        raise QueryError(f"connect: no runs directory at '{Path(runs_dir).resolve()}'; run an "
                         "experiment first (evalkit run +experiment=quickstart) or pass the "
                         "directory your runs are in")
    run_dir = None
    if run is not None:
        from evalkit.commands._runs import find_run

        run_dir = find_run(run, Path(runs_dir), "connect", unfinished=include_unfinished)
    return ReadOnlyConnection(_connect(runs_dir, run=run_dir, limits=limits,
                                       include_unfinished=include_unfinished, lazy=True))


def run(experiment: str | None = None, overrides: list[str] | tuple[str, ...] = (), *,
        summary: bool = False) -> Run:
    """Run an experiment as ``evalkit run +experiment=EXPERIMENT OVERRIDES`` does and return
    the finished :class:`~evalkit.api.Run` (see :func:`evalkit.api.run`)."""
    from evalkit.api import run as _run

    return _run(experiment, overrides, summary=summary)


def open_run(ref: str = "latest", runs_dir: str = "runs") -> Run:
    """A finished run: ``latest``, a run id under ``runs_dir``, or a run directory."""
    from evalkit.api import open_run as _open_run

    return _open_run(ref, runs_dir)


def __getattr__(name: str) -> object:
    if name == "Run":
        from evalkit.api import Run

        return Run
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
