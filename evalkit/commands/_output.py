"""How every listing command (``query``, ``plugins``, ``compare``, ``runs``) prints rows.

``--format`` picks one of :data:`FORMATS`; the default, ``table``, is for people: numbers at
sensible precision, and a table only when it fits the terminal, else one record per block
(vertical mode). Names and values are never cut: a pipe gets the table at its natural width.
Values are data: a table shows control characters as escapes, Markdown neutralises links,
HTML and mentions, JSON escapes controls losslessly and CSV guards spreadsheet formulas
(``--csv-formulas`` turns that off; see :mod:`evalkit.safetext`). Only the standard library
is imported here, so ``evalkit query`` stays fast."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from evalkit.numbers import number
from evalkit.safetext import csv_cell, json_visible, markdown_text, visible

__all__ = ["FORMATS", "add_format_arguments", "chosen_format", "emit", "cell"]

FORMATS = ("table", "vertical", "csv", "json", "jsonl", "markdown", "parquet")
_BY_SUFFIX = {"csv": "csv", "json": "json", "jsonl": "jsonl", "ndjson": "jsonl",
              "md": "markdown", "markdown": "markdown", "parquet": "parquet"}


def add_format_arguments(parser: argparse.ArgumentParser, *, out: bool = True) -> None:
    """``--format`` (and ``--out FILE``) on a listing command."""
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="table (default: vertical when the table is wider than the "
                        "terminal), vertical, csv, json (an array), jsonl (one object per "
                        "line), markdown or parquet (needs --out)")
    if out:
        parser.add_argument("--out", default=None, metavar="FILE",
                            help="write to FILE (its extension picks the format)")
    parser.add_argument("--csv-formulas", action="store_true",
                        help="CSV: write text starting with = + - @ tab or CR as it is (by "
                        "default such a cell gets a leading ' so a spreadsheet does not run "
                        "it as a formula)")


def chosen_format(fmt: str | None, out: str | None) -> str:
    """The format asked for, or the one ``out``'s extension names, or ``table``."""
    if fmt is not None:
        return fmt
    if out:
        return _BY_SUFFIX.get(Path(out).suffix.lstrip(".").lower(), "table")
    return "table"


def cell(value: Any) -> str:
    """A value as a table cell for a terminal: full text (control characters shown as
    escapes, line breaks kept), numbers by :func:`number`, lists and objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, dict, tuple)):
        return visible(json.dumps(value, default=str, ensure_ascii=False))
    return visible(value, newlines=True)


def _width() -> int | None:
    """The width a table must fit: the terminal's, or $COLUMNS; None (any) for a pipe."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() else None


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]],
                width: int | None) -> list[str] | None:
    """The rows as an aligned table, or None when it is wider than ``width`` or a cell holds
    a line break (vertical mode shows those whole)."""
    cells = [[cell(v) for v in row] for row in rows]
    if any("\n" in c for row in cells for c in row):
        return None
    columns = [visible(c) for c in columns]
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in
              enumerate(columns)]
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        return None
    numeric = [all(isinstance(row[i], (int, float)) and not isinstance(row[i], bool)
                   for row in rows if row[i] is not None) and any(row[i] is not None
                                                                  for row in rows)
               for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    return [line(list(columns)), "  ".join("-" * w for w in widths),
            *(line(row) for row in cells)]


def vertical_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """One block per row: each column's name, then its whole value (continuation lines of a
    long text indented under it)."""
    columns = [visible(c) for c in columns]
    pad = max((len(c) for c in columns), default=0)
    out: list[str] = []
    for n, row in enumerate(rows, 1):
        out.append(f"-[ row {n} ]" + "-" * max(0, pad - 6))
        for name, value in zip(columns, row, strict=True):
            first, *rest = cell(value).split("\n") or [""]
            out.append(f"{name.ljust(pad)}  {first}".rstrip())
            out += [" " * (pad + 2) + more for more in rest]
    return out


def markdown_lines(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """A Markdown table, line by line; every name and value through :func:`markdown_text`
    (one line, no link, image, HTML or mention from data)."""
    yield "| " + " | ".join(markdown_text(c) for c in columns) + " |"
    yield "|" + "|".join(" --- " for _ in columns) + "|"
    for row in rows:
        yield "| " + " | ".join(markdown_text(cell(v)) for v in row) + " |"


def _plain(value: Any, formulas: bool) -> Any:
    """A value as CSV can hold it: lists and objects become JSON text; a formula-looking
    text is guarded unless ``formulas``."""
    if isinstance(value, (list, dict, tuple)):
        value = json.dumps(value, default=str, ensure_ascii=False)
    return value if formulas else csv_cell(value)


def _write(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str,
           out: TextIO, max_rows: int | None, note: str | None, formulas: bool = False) -> int:
    """Write ``rows`` (read once, as they come: a large result is never held whole) in
    ``fmt``; how many there were."""
    n = 0

    def counted() -> Iterator[Sequence[Any]]:
        nonlocal n
        for row in rows:
            n += 1
            yield row

    if fmt == "csv":
        writer = csv.writer(out)
        writer.writerow([_plain(c, formulas) for c in columns])
        writer.writerows([_plain(v, formulas) for v in row] for row in counted())
    elif fmt in ("json", "jsonl"):
        # json: an array with one object per line, valid JSON that still reads line by line
        for row in counted():
            text = json_visible(json.dumps(dict(zip(columns, row, strict=True)), default=str,
                                           ensure_ascii=False))
            out.write(text + "\n" if fmt == "jsonl" else ("[\n" if n == 1 else ",\n") + text)
        if fmt == "json":
            out.write("\n]\n" if n else "[]\n")
    elif fmt == "markdown":
        for line in markdown_lines(columns, counted()):
            out.write(line + "\n")
    else:
        found = iter(counted())
        shown = list(found if max_rows is None else itertools.islice(found, max_rows))
        for _ in found:  # the rows not shown: counted, not kept
            pass
        lines = None if fmt == "vertical" else table_lines(columns, shown, _width())
        if lines is None:
            lines = vertical_lines(columns, shown)
        out.write("\n".join(lines) + "\n")
        hidden = n - len(shown)
        footer = f"{n} row{'' if n == 1 else 's'}" + (
            f" ({hidden} not shown; --max-rows N, or --format csv|json)" if hidden else "")
        note = visible(note) if note else note  # (it may name runs: data)
        out.write(f"{note}\n" if note and not n else
                  (f"{note}\n" if note else "") + footer + "\n")
    return n


def emit(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str,
         out: str | None = None, *, max_rows: int | None = None,
         note: str | None = None, csv_formulas: bool = False) -> None:
    """Print ``rows`` (or write them to ``out``) in ``fmt``; ``rows`` is read once, as it
    comes (an iterator of a large result is never held whole). ``note`` is a line shown
    under a table for people (never in machine formats). ``csv_formulas``: CSV cells that
    start like a formula are written as they are (by default they get a leading ``'``)."""
    if fmt == "parquet":
        if not out:
            from evalkit.errors import EvalkitError

            raise EvalkitError("--format parquet needs --out FILE.parquet")
        import pyarrow as pa
        import pyarrow.parquet as pq

        from evalkit.results.writer import atomic_path

        table = pa.Table.from_pylist([dict(zip(columns, row, strict=True)) for row in rows])
        with atomic_path(Path(out)) as tmp:
            pq.write_table(table, tmp)
        n = table.num_rows
    elif out:
        from evalkit.results.writer import atomic_path

        with atomic_path(Path(out)) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
            n = _write(columns, rows, fmt, fh, None, None, csv_formulas)
    else:
        try:
            _write(columns, rows, fmt, sys.stdout, max_rows, note, csv_formulas)
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    print(f"wrote {n} rows to {out}", file=sys.stderr)
