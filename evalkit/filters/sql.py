"""``sql``: sets aside records matching a DuckDB predicate over the record columns, e.g.
``where: "latency_s > 30 OR model LIKE '%preview%'"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Filter
from evalkit.results.schemas import RECORDS

__all__ = ["SqlConfig", "SqlFilter"]


@dataclass(frozen=True)
class SqlConfig:
    where: str = "???"  # DuckDB boolean expression over record columns
    keep: bool = False  # true: the predicate says which records to KEEP (set aside the rest)
    reason: str | None = None  # the exclude reason; default quotes the predicate

    def validate(self) -> None:
        con = _connect()
        try:
            con.execute(_query(self.where, self.keep), [""]).fetchall()
        except Exception as exc:  # duckdb raises one class per kind of SQL error
            raise ValueError(f"where: {self.where!r} is not a valid predicate over the "
                             f"record columns: {str(exc).splitlines()[0]}") from None
        finally:
            con.close()


def _connect() -> Any:
    import duckdb

    con = duckdb.connect()
    con.register("records", _with_row(RECORDS.empty_table()))
    return con


def _with_row(table: pa.Table) -> pa.Table:
    """``table`` plus ``__row``, its row number, so the result comes back in input order."""
    return table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))


def _query(where: str, keep: bool) -> str:
    # a null predicate keeps the record in exclude mode and sets it aside in keep mode, so
    # NULL never quietly passes a keep-list
    hit = f"coalesce(({where}), false)" if not keep else f"NOT coalesce(({where}), false)"
    return f"SELECT CASE WHEN {hit} THEN ? END AS reason FROM records ORDER BY __row"


class SqlFilter(Filter):
    """Marks records for which ``where`` is true (or, with ``keep``, not true). The predicate
    sees one table, ``records``, with every record column."""

    Config = SqlConfig

    def __init__(self, name: str, config: SqlConfig, ctx: object) -> None:
        self.config = config
        verb = "does not match" if config.keep else "matches"
        self.reason = config.reason or f"{verb} {config.where}"
        self.con = None

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """``reason`` for each record the predicate sets aside, null for the rest."""
        if self.con is None:
            import duckdb

            self.con = duckdb.connect()
        self.con.register("records", _with_row(pa.Table.from_batches([batch])))
        try:
            out = self.con.execute(_query(self.config.where, self.config.keep),
                                   [self.reason]).to_arrow_table().column("reason")
        finally:
            self.con.unregister("records")
        return pc.cast(out.combine_chunks(), pa.string())
