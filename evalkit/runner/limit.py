"""``source.limit``: the first N records of any source."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def limited(batches: Iterator[Any], limit: int | None, ctx: Any) -> Iterator[Any]:
    """``batches`` up to ``limit`` records in all; the batch that reaches it is cut (with the
    scores it imported for the records cut off), and the source is closed there, so it reads
    no further."""
    if limit is None:
        yield from batches
        return
    left = limit
    try:
        for batch in batches:
            if batch.num_rows < left:
                left -= batch.num_rows
                yield batch
                continue
            kept = batch.slice(0, left)
            ids = kept.column("record_id") if "record_id" in kept.schema.names else None
            if ids is not None and kept.num_rows < batch.num_rows:
                ids = pa.chunked_array([ids]) if isinstance(ids, pa.Array) else ids
                ctx.imported[:] = [t.filter(pc.is_in(t.column("record_id"),
                                                     value_set=ids.combine_chunks()))
                                   for t in ctx.imported]
            yield kept
            return
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
