"""evalkit: evaluate LLM applications from declarative Hydra configs.

The public Python surface is small: :func:`connect` opens DuckDB over a runs directory (for
notebooks), and the plugin contracts live in :mod:`evalkit.plugin`."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["connect", "__version__"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from evalkit.results.query import ReadOnlyConnection


def connect(runs_dir: str = "runs") -> ReadOnlyConnection:
    """A read-only DuckDB connection with views ``runs``, ``records``, ``judgments``,
    ``metrics``, ``alerts`` and ``rejects`` over every run under ``runs_dir``:
    ``connect("runs").sql("SELECT ...").df()``. It runs one plain read per call, can read
    nothing outside ``runs_dir`` and can write nothing (see docs/trust.md)."""
    from evalkit.results.query import ReadOnlyConnection
    from evalkit.results.query import connect as _connect

    return ReadOnlyConnection(_connect(runs_dir))
