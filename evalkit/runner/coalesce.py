"""The batches the runner filters, writes and judges: a source's small batches gathered into
batches of ``runner.batch_size`` records. A source yields a batch per file (or page) at
least, so 5,000 one-line files were 5,000 batches, each with its own Parquet part per judge,
its own filter and judge calls and its own ``.progress`` line: 35 times the cost of the same
records in one file. Gathered, they cost what one file costs (bench/bench_many_files.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from evalkit.plugin import ImportedScores, Reject, SourceItem
from evalkit.results.schemas import RECORDS, conform

__all__ = ["coalesced"]


def coalesced(items: Iterator[SourceItem], size: int, run_id: str) -> Iterator[SourceItem]:
    """``items`` with every record batch conformed to the records schema and small batches
    gathered until they hold ``size`` records (a batch that large already passes as it is,
    never cut). Rejects and imported scores pass at once; the scores reach the runner before
    the batch holding their records, as they did before. The batches depend only on the
    source's, so a resumed run gathers the same ones."""
    pending: list[pa.Table] = []
    rows = 0
    for item in items:
        if isinstance(item, (Reject, ImportedScores)):
            yield item
            continue
        table = item if isinstance(item, pa.Table) else pa.Table.from_batches([item])
        if not pending and table.num_rows >= size:
            yield conform(table, RECORDS, {"run_id": run_id})
            continue
        pending.append(table)
        rows += table.num_rows
        if rows >= size:
            yield _one(pending, run_id)
            pending, rows = [], 0
    if pending:
        yield _one(pending, run_id)


def _one(tables: list[pa.Table], run_id: str) -> pa.Table:
    """``tables`` as one conformed table, in one chunk per column (thousands of one-row
    chunks slow every compute call after). Conformed once when their columns unify (a
    column null in one file and text in another does), else each on its own first."""
    fill = {"run_id": run_id}
    if len(tables) == 1:
        return conform(tables[0], RECORDS, fill)
    try:
        whole = pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        whole = pa.concat_tables([conform(t, RECORDS, fill) for t in tables])
    return conform(whole.combine_chunks(), RECORDS, fill)
