"""``source.limit`` over what a source yields: rejects pass through, imported scores wait for
the batch they belong to and lose the records the limit cuts off, and the source is closed
at the limit."""

from __future__ import annotations

import pyarrow as pa

from evalkit.plugin import ImportedScores, Reject
from evalkit.runner.limit import limited


def _items(closed: list[bool]):
    try:
        yield Reject("a:1", "bad")
        yield ImportedScores.of([{"record_id": "r0", "judge": "j", "value": 1.0}])
        yield pa.table({"record_id": ["r0", "r1"]})
        yield ImportedScores.of([{"record_id": r, "judge": "j", "value": 1.0}
                                 for r in ("r2", "r3")])
        yield Reject("a:5", "bad too")
        yield pa.table({"record_id": ["r2", "r3"]})
        yield pa.table({"record_id": ["r4"]})
    finally:
        closed.append(True)


def test_limit_cuts_the_batch_and_its_scores_and_closes_the_source():
    closed: list[bool] = []
    got = list(limited(_items(closed), 3))
    kinds = [type(item).__name__ for item in got]
    assert kinds == ["Reject", "ImportedScores", "Table", "Reject", "ImportedScores", "Table"]
    assert got[5].column("record_id").to_pylist() == ["r2"]
    assert got[4].table.column("record_id").to_pylist() == ["r2"]
    assert closed == [True]


def test_no_limit_passes_everything_through():
    closed: list[bool] = []
    assert len(list(limited(_items(closed), None))) == 7
