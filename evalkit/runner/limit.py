"""``source.limit``: the first N records of any source."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import ImportedScores, Reject, SourceItem

__all__ = ["limited"]


def limited(items: Iterator[SourceItem], limit: int | None) -> Iterator[SourceItem]:
    """What a source yields, up to ``limit`` records in all; the batch that reaches it is cut
    (with the scores imported for the records cut off), and the source is closed there, so
    it reads no further."""
    if limit is None:
        yield from items
        return
    left = limit
    scores: list[ImportedScores] = []  # those of the batch to come
    try:
        for item in items:
            if isinstance(item, Reject):
                yield item
                continue
            if isinstance(item, ImportedScores):
                scores.append(item)
                continue
            if item.num_rows < left:
                left -= item.num_rows
                yield from scores
                scores = []
                yield item
                continue
            kept = item.slice(0, left)
            ids = kept.column("record_id") if "record_id" in kept.schema.names else None
            if ids is not None and kept.num_rows < item.num_rows:
                ids = pa.chunked_array([ids]) if isinstance(ids, pa.Array) else ids
                scores = [ImportedScores(s.table.filter(pc.is_in(
                    s.table.column("record_id"), value_set=ids.combine_chunks())))
                    for s in scores]
            yield from scores
            yield kept
            return
    finally:
        close = getattr(items, "close", None)  # (a generator's; a plain iterator has none)
        if close is not None:
            close()
