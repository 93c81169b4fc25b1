"""The four plugin contracts. A plugin is a class registered under an entry point group
(``evalkit.sources``, ``evalkit.filters``, ``evalkit.judges``, ``evalkit.metrics``) with:

- ``Config``: a frozen dataclass, one short comment per field. The instance's YAML (minus its
  ``plugin:`` key) is validated against it before anything runs;
- ``__init__(self, name: str, config: Config, ctx: RunContext)``: ``name`` is the instance
  name (the YAML key), ``ctx`` the run it belongs to;
- the method(s) of its kind, below.

Heavy imports belong inside those methods (or a private module they import), so that
discovering and validating a plugin stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb



@runtime_checkable
class Source(Protocol):
    """Yields records. Each batch holds any subset of the records columns
    (:data:`evalkit.results.schemas.RECORDS`); missing ones become null and ``run_id`` is set by
    the runner. ``record_id`` must be stable across runs of the same input.

    Input that cannot become a record goes to ``ctx.reject(...)``, never raised and never
    dropped. Scores the input already carries go to ``ctx.import_judgments(...)``."""

    Config: ClassVar[type]

    def read(self) -> Iterator[pa.RecordBatch | pa.Table]:
        """Yield record batches until the input is exhausted."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """What identifies this input (paths, sizes, hashes, a server and time window), for
        the manifest."""
        ...


@runtime_checkable
class Filter(Protocol):
    """Marks records to be set aside. Filters never drop: a marked record stays in
    ``records`` with ``excluded_by`` (the first filter that marked it) and ``exclude_reason``."""

    Config: ClassVar[type]

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """One string per row of ``batch``: the reason to exclude it, or null to keep it."""
        ...


@runtime_checkable
class Judge(Protocol):
    """Scores records. Implement ``judge`` (synchronous, whole batch: deterministic judges) or
    ``ajudge`` (a coroutine: LLM judges, which the runner runs concurrently).

    The result holds columns of :data:`evalkit.results.schemas.JUDGMENTS`, at least
    ``record_id`` and ``status``; ``run_id``, ``judge``, ``plugin``, ``origin`` and
    ``judge_model`` are filled in by the runner when absent. A record the judge could not score
    is a row with ``status='error'`` and a null ``value``: never a default score.

    Class attributes: ``applies_to_excluded`` (default False) lets a judge see records that a
    filter set aside; otherwise the runner writes a ``status='skipped'`` judgment for them.
    Optional: ``judge_model`` (str), ``estimate(batch) -> dict`` for ``runner.dry_run``
    (keys ``calls``, ``input_tokens``, ``cost_usd``), and ``close()``. ``thread_safe = True``
    says ``judge`` may run on a thread other than the one that built the judge (it keeps no
    thread-bound resource, such as a sqlite connection); when every judge of a run says so,
    each batch is judged on a thread while the run reads, filters and writes the next.
    ``wanted_columns()`` (the record columns the judge reads) lets the runner hand the judges
    those columns (and ``record_id``) only, when every judge of the run has it: the others
    are not copied for the included records."""

    Config: ClassVar[type]


@runtime_checkable
class Metric(Protocol):
    """Summarises a run. ``compute`` gets a DuckDB connection with the run's ``records``,
    ``judgments`` (and ``included``: records not excluded) as views and returns metric rows
    (columns of :data:`evalkit.results.schemas.METRICS`; ``metric`` defaults to the instance
    name, ``run_id`` and ``plugin`` are filled in by the runner).

    Optional class attribute: ``thread_safe = True`` says ``compute`` may run on another
    thread beside other metrics, with a cursor of its own (it keeps no state outside the
    instance and the connection it is given). A run whose metrics all say so computes them
    on a thread per core; one metric without it keeps them all on the run's thread."""

    Config: ClassVar[type]
    higher_is_better: ClassVar[bool | None]

    def compute(self, con: duckdb.DuckDBPyConnection) -> pa.Table | list[dict[str, Any]]:
        """The metric rows for this run, one per slice (and statistic)."""
        ...


@runtime_checkable
class Sink(Protocol):
    """Sends a finished run somewhere else (Langfuse scores, a warehouse). Used by
    ``evalkit push RUN --to NAME`` and, for the sinks under ``sinks:`` in a config, at the
    end of every run. ``__init__`` gets ``ctx=None`` when called from ``evalkit push``."""

    Config: ClassVar[type]

    def push(self, run_dir: Path) -> dict[str, Any]:
        """Send the run in ``run_dir``; return a JSON-able report of what was sent, skipped
        and failed, with reasons (``failed``: a count, which the runner reports when not 0).
        The runner adds it to the manifest under ``sinks``."""
        ...


REQUIRED: dict[str, tuple[str, ...]] = {
    "sources": ("Config", "read"),
    "filters": ("Config", "mark"),
    "judges": ("Config",),
    "metrics": ("Config", "compute"),
    "sinks": ("Config", "push"),
}
PROTOCOL_NAMES = {"sources": "Source", "filters": "Filter", "judges": "Judge", "metrics": "Metric",
                  "sinks": "Sink"}
