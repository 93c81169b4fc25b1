"""``evalkit query "SQL"``: DuckDB over every run, printed as a table or saved."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

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
    con = connect(runs_dir)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        from evalkit.results.writer import atomic_path

        table = run_query(con, args.sql, arrow=True)
        with atomic_path(Path(args.out)) as tmp:
            pq.write_table(table, tmp)
        print(f"wrote {table.num_rows} rows to {args.out}", file=sys.stderr)
        return 0
    columns, rows = run_query(con, args.sql)
    if fmt == "table" and not args.out:
        _print_table(columns, rows, args.max_rows)
        return 0
    if fmt == "table":
        raise QueryError("query: --out needs --format csv, json or parquet (or a file name "
                         "ending in one of them)")
    if args.out:
        from evalkit.results.writer import atomic_path

        with atomic_path(Path(args.out)) as tmp, tmp.open("w", newline="") as fh:
            _write(columns, rows, fmt, fh)
        print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    else:
        _write(columns, rows, fmt, sys.stdout)
    return 0


def _json_default(value: object) -> object:
    return str(value)


def _write(columns: list[str], rows: list[tuple], fmt: str, out: TextIO) -> None:
    if fmt == "csv":
        import csv

        writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(columns)
        for row in rows:
            # CSV has no lists or structs: those cells become JSON text
            writer.writerow([json.dumps(v, default=_json_default)
                             if isinstance(v, (list, dict)) else v for v in row])
    else:
        for row in rows:
            out.write(json.dumps(dict(zip(columns, row, strict=True)), default=_json_default,
                                 ensure_ascii=False) + "\n")


def _print_table(columns: list[str], rows: list[tuple], max_rows: int) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Table(show_lines=False, header_style="bold")
    for name in columns:
        out.add_column(name, overflow="fold", max_width=60)
    for row in rows[:max_rows]:
        out.add_row(*("" if v is None else _cell(v) for v in row))
    console = Console()
    console.print(out)
    more = len(rows) - max_rows
    console.print(f"{len(rows)} rows" + (f" ({more} not shown; --max-rows)" if more > 0
                                         else ""), style="dim")


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 200 else text[:200] + "…"
