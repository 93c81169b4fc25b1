"""Testing helpers for plugin authors: :func:`read_source` splits what a source yields, and
the conformance suites (:mod:`evalkit.testing.suites`) check a plugin against its contract
the way the runner will use it. evalkit's own plugins are tested with the same suites."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from evalkit.plugin import ImportedScores, Reject, SourceItem

__all__ = ["SourceRead", "read_source"]


@dataclass
class SourceRead:
    """What one read of a source gave, split by kind, in the order it came."""

    batches: list[pa.Table] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    imported: list[pa.Table] = field(default_factory=list)

    @property
    def table(self) -> pa.Table:
        """Every record batch as one table (an empty table when there was none)."""
        return pa.concat_tables(self.batches, promote_options="default") if self.batches \
            else pa.table({})

    @property
    def reject_rows(self) -> list[dict]:
        """Every reject as a dict (``location``, ``reason``, ``raw``)."""
        return [dataclasses.asdict(r) for r in self.rejects]

    @property
    def records(self) -> list[dict]:
        """Every record row, as dicts."""
        return [row for batch in self.batches for row in batch.to_pylist()]

    @property
    def scores(self) -> list[dict]:
        """Every imported score, as judgment rows (dicts)."""
        return [row for table in self.imported for row in table.to_pylist()]


def read_source(items: Iterable[SourceItem]) -> SourceRead:
    """Drain ``items`` (``source.read()``) into a :class:`SourceRead`."""
    out = SourceRead()
    for item in items:
        if isinstance(item, Reject):
            out.rejects.append(item)
        elif isinstance(item, ImportedScores):
            out.imported.append(item.table)
        else:
            out.batches.append(item if isinstance(item, pa.Table)
                               else pa.Table.from_batches([item]))
    return out
