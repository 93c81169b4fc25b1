"""evalkit: evaluate LLM applications from declarative Hydra configs.

The public Python surface is small: :func:`connect` opens DuckDB over a runs directory (for
notebooks), and the plugin contracts live in :mod:`evalkit.protocols`."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["connect", "__version__"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    import duckdb


def connect(runs_dir: str = "runs") -> duckdb.DuckDBPyConnection:
    """DuckDB with views ``runs``, ``records``, ``judgments``, ``metrics``, ``alerts`` and
    ``rejects`` over every run under ``runs_dir``; it can read nothing else."""
    from evalkit.results.query import connect as _connect

    return _connect(runs_dir)
