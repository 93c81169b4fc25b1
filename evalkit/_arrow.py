"""Arrow helpers shared by the stages."""

from __future__ import annotations

import pyarrow as pa


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``column`` as one array; a column of one chunk is that chunk, not a copy of it
    (``combine_chunks`` copies even then: ~2.6 ms for 10 MB of text)."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` as one record batch, copying only the columns of several chunks."""
    return pa.RecordBatch.from_arrays([one_array(c) for c in table.columns],
                                      schema=table.schema)
