"""``evalkit query "SQL"``: DuckDB over every run (or one: ``--run latest|ID``), printed for
people or saved as CSV, JSON, JSON Lines, Markdown or Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.commands._output import add_format_arguments, chosen_format, emit
from evalkit.errors import QueryError
from evalkit.results.storage import is_remote, shown_url

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="one SELECT over the views runs, latest, records, "
                        "judgments, metrics, alerts, rejects, labels")
    parser.add_argument("--runs-dir", default="runs", help="the runs directory, or a URL "
                        "such as s3://BUCKET/PREFIX (default: runs)")
    parser.add_argument("--run", default=None, metavar="latest|ID",
                        help="the views hold this run only: its id, its directory, or latest "
                        "(the run that finished last)")
    add_format_arguments(parser)
    parser.add_argument("--max-rows", type=int, default=50,
                        help="rows shown in table format (default: 50)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="stop a query after this long (default: $EVALKIT_QUERY_TIMEOUT "
                        "or 300)")
    parser.add_argument("--memory-limit", default=None, metavar="SIZE",
                        help="DuckDB's memory limit for the query, e.g. 2GB (default: "
                        "$EVALKIT_QUERY_MEMORY_LIMIT, or half the memory up to 4GB)")
    parser.add_argument("--all-runs", action="store_true",
                        help="read the tables of unfinished runs too (running, failed, "
                        "interrupted; see the runs table's status)")


def main(args: argparse.Namespace) -> int:
    from evalkit.results.query import connect
    from evalkit.results.sandbox import Limits, cap_process_memory

    limits = Limits.resolve(args.memory_limit, args.timeout)
    cap_process_memory(limits)  # (this process only queries: one value cannot pass the limit)
    fmt = chosen_format(args.format, args.out)
    if fmt == "parquet" and not args.out:
        raise QueryError("query: --format parquet needs --out FILE.parquet")
    if is_remote(args.runs_dir):  # object storage: see evalkit/results/storage.py
        with connect(args.runs_dir, run=args.run, include_unfinished=args.all_runs,
                     lazy=True, key="--runs-dir", limits=limits) as con:
            return _answer(con, args, fmt, args.run, shown_url(args.runs_dir))
    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        raise QueryError(f"query: no runs directory at '{runs_dir.resolve()}'; run an "
                         "experiment first (evalkit run +experiment=quickstart) or pass "
                         "--runs-dir")
    run = None
    if args.run is not None:
        from evalkit.commands._runs import find_run

        run = find_run(args.run, runs_dir, "query", unfinished=args.all_runs)
        runs_dir = run.resolve().parent.parent
    # (closed before the process ends: not left to the interpreter's teardown)
    with connect(runs_dir, run=run, include_unfinished=args.all_runs, lazy=True,
                 limits=limits) as con:
        return _answer(con, args, fmt, run.name if run is not None else None,
                       f"{runs_dir.resolve()}")


def _answer(con, args: argparse.Namespace, fmt: str, run: str | None, where: str) -> int:
    from evalkit.results.query import run_query

    if fmt == "parquet":
        import pyarrow.parquet as pq

        from evalkit.results.writer import atomic_path

        table = run_query(con, args.sql, arrow=True)
        with atomic_path(Path(args.out)) as tmp:
            pq.write_table(table, tmp)
        print(f"wrote {table.num_rows} rows to {args.out}", file=sys.stderr)
        return 0
    import itertools

    columns, stream = run_query(con, args.sql, stream=True)
    first = next(stream, None)  # (an empty result says what was read)
    rows = () if first is None else itertools.chain((first,), stream)
    note = None
    if first is None:
        # say what was read: an empty result over the wrong directory looks like no data
        n_runs = con.sql("SELECT count(*) FROM runs").fetchone()[0]
        what = f"run {run}" if run is not None else f"{n_runs} run(s)"
        note = f"no rows; read {what} under {where}/"
        if args.out or fmt not in ("table", "vertical"):
            print(f"evalkit: {note}", file=sys.stderr)
    emit(columns, rows, fmt, args.out, max_rows=args.max_rows, note=note,
         csv_formulas=args.csv_formulas)
    return 0
