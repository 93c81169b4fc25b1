"""``evalkit query "SQL"``: DuckDB over every run, printed as a table or saved."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.errors import QueryError

FORMATS = ("table", "csv", "json", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="one SELECT over the views runs, records, judgments, "
                        "metrics, alerts, rejects")
    parser.add_argument("--runs-dir", default="runs", help="the runs directory (default: runs)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: table, or from --out's extension)")
    parser.add_argument("--out", default=None, help="write the result to this file")
    parser.add_argument("--max-rows", type=int, default=50,
                        help="rows shown in table format (default: 50)")


def main(args: argparse.Namespace) -> int:
    from evalkit.results.query import connect, run_query

    fmt = args.format
    if fmt is None:
        suffix = Path(args.out).suffix.lstrip(".") if args.out else ""
        fmt = suffix if suffix in FORMATS else "table"
    if fmt == "parquet" and not args.out:
        raise QueryError("query: --format parquet needs --out FILE.parquet")
    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        raise QueryError(f"query: no runs directory at '{runs_dir}'; run an experiment first "
                         "(evalkit run +experiment=quickstart) or pass --runs-dir")
    table = run_query(connect(runs_dir), args.sql)
    if table is None:
        return 0
    if args.out:
        from evalkit.results.writer import atomic_path

        out = Path(args.out)
        with atomic_path(out) as tmp:
            _write(table, fmt, tmp)
        print(f"wrote {table.num_rows} rows to {out}", file=sys.stderr)
    elif fmt == "table":
        _print_table(table, args.max_rows)
    else:
        _write(table, fmt, None)
    return 0


def _write(table, fmt: str, path: Path | None) -> None:
    if fmt == "csv":
        import pyarrow.csv as pacsv

        sink = str(path) if path else sys.stdout.buffer
        pacsv.write_csv(_flat(table), sink)
    elif fmt == "json":
        import json

        rows = table.to_pylist()
        text = "\n".join(json.dumps(r, default=str, ensure_ascii=False) for r in rows)
        if path:
            path.write_text(text + "\n" if text else "")
        else:
            sys.stdout.write(text + "\n" if text else "")
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    else:
        raise QueryError(f"query: --format {fmt} cannot be written to a file; use csv, json "
                         "or parquet")


def _flat(table):
    """CSV has no lists or structs: such columns become JSON text."""
    import json

    import pyarrow as pa

    cols = []
    for col in table.columns:
        if pa.types.is_nested(col.type):
            col = pa.array([None if v is None else json.dumps(v, default=str)
                            for v in col.to_pylist()], pa.string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _print_table(table, max_rows: int) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Table(show_lines=False, header_style="bold")
    for name in table.column_names:
        out.add_column(name, overflow="fold", max_width=60)
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*("" if v is None else _cell(v) for v in row.values()))
    console = Console()
    console.print(out)
    more = table.num_rows - max_rows
    console.print(f"{table.num_rows} rows" + (f" ({more} not shown; --max-rows)" if more > 0
                                              else ""), style="dim")


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 200 else text[:200] + "…"
