"""evalkit._arrow: one array or batch from chunked columns, without copying a single chunk."""

import pyarrow as pa

from evalkit._arrow import one_array, one_batch


def test_one_chunk_is_not_copied_several_are_joined():
    chunk = pa.array(["a", None, "ccc"])
    assert one_array(pa.chunked_array([chunk])).buffers()[2].address == \
        chunk.buffers()[2].address
    assert one_array(pa.chunked_array([chunk, chunk])).to_pylist() == ["a", None, "ccc"] * 2
    assert one_array(pa.chunked_array([], pa.string())).to_pylist() == []
    assert one_array(chunk) is chunk


def test_one_batch_holds_the_table():
    table = pa.table({"x": pa.chunked_array([[1, 2], [3]]),
                      "y": pa.chunked_array([["a", "b", "c"]])})
    batch = one_batch(table)
    assert pa.Table.from_batches([batch]).equals(table.combine_chunks())
    assert one_batch(table.slice(0, 0)).num_rows == 0
