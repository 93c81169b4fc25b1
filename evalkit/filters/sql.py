"""``sql``: sets aside records matching a DuckDB predicate over the record columns, e.g.
``where: "latency_s > 30 OR model LIKE '%preview%'"``.

The predicate is parsed by DuckDB as one expression and handed to DuckDB's relation API,
never pasted into a statement, and runs in the sandbox every config SQL text runs in
(:class:`~evalkit.plugin.ConfigSql`: no file access, locked settings, memory and time
limits). Validating the config (``--cfg job`` included) parses and binds it, and runs
nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.errors import QueryError
from evalkit.plugin import ConfigSql, Filter
from evalkit.results.schemas import RECORDS

__all__ = ["SqlConfig", "SqlFilter"]


@dataclass(frozen=True)
class SqlConfig:
    where: str = "???"  # DuckDB boolean expression over record columns (one expression)
    keep: bool = False  # true: the predicate says which records to KEEP (set aside the rest)
    reason: str | None = None  # the exclude reason; default quotes the predicate

    def validate(self) -> None:
        sql = ConfigSql("where")
        try:
            sql.register("records", _with_row(RECORDS.empty_table()))
            sql.bind("records", *_select(sql, self.where, self.keep, ""))
        except QueryError as exc:
            problem = str(exc).partition(": ")[2]
            raise ValueError(f"where: {self.where!r} is not a valid predicate over the "
                             f"record columns: {problem}") from None
        finally:
            sql.close()


def _with_row(table: pa.Table) -> pa.Table:
    """``table`` plus ``__row``, its row number, so the result comes back in input order."""
    return table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))


def _select(sql: ConfigSql, where: str, keep: bool, reason: str) -> list[Any]:
    import duckdb

    predicate = sql.expression(where)
    # a null predicate keeps the record in exclude mode and sets it aside in keep mode, so
    # NULL never quietly passes a keep-list
    hit = duckdb.CoalesceOperator(predicate, duckdb.ConstantExpression(False))
    if keep:
        hit = ~hit
    return [duckdb.CaseExpression(hit, duckdb.ConstantExpression(reason)).alias("reason"),
            duckdb.ColumnExpression("__row")]


class SqlFilter(Filter):
    """Marks records for which ``where`` is true (or, with ``keep``, not true). The predicate
    sees one table, ``records``, with every record column."""

    Config = SqlConfig

    def __init__(self, name: str, config: SqlConfig, ctx: object) -> None:
        self.config = config
        verb = "does not match" if config.keep else "matches"
        self.reason = config.reason or f"{verb} {config.where}"
        self.what = f"filters.{name}.where"
        self.sql: ConfigSql | None = None

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """``reason`` for each record the predicate sets aside, null for the rest."""
        if self.sql is None:
            self.sql = ConfigSql(self.what)
        self.sql.register("records", _with_row(pa.Table.from_batches([batch])))
        try:
            out = self.sql.project(
                "records", *_select(self.sql, self.config.where, self.config.keep, self.reason),
                order_by="__row").column("reason")
        finally:
            self.sql.unregister("records")
        return pc.cast(out.combine_chunks(), pa.string())
