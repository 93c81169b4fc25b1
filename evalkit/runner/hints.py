"""Mistakes that look like data, said when they are first seen: a source field mapped to a
path that no record has (a typo) would otherwise show up only as empty columns, or as
"excluded 5 (pipeline_failure 5)" when the output is what went missing."""

from __future__ import annotations

import difflib
import json
import sys
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.sources._transforms import paths_of

__all__ = ["unmatched_fields", "warn"]


def unmatched_fields(source: Any, table: pa.Table) -> list[str]:
    """A warning for each ``source.fields`` entry whose record column is null in every row of
    ``table`` (the first batch), with the closest key the records do have."""
    fields = getattr(source.config, "fields", None) or {}
    if not table.num_rows or not isinstance(fields, dict):
        return []
    keys: set[str] = set()
    if "metadata" in table.column_names:  # the keys the mapping did not use
        for text in table.column("metadata").slice(0, 20).to_pylist():
            try:
                keys |= set(json.loads(text)) if text else set()
            except (ValueError, TypeError):
                continue
    out = []
    for column, spec in fields.items():
        if column not in table.column_names or pc.count(table.column(column)).as_py():
            continue
        path = " | ".join(paths_of(spec))
        close = difflib.get_close_matches(str(path).split(".")[0], sorted(keys), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else \
            (f"; the records' other keys: {', '.join(sorted(keys)[:12])}" if keys else "")
        out.append(f"source.fields.{column}: '{path}' matched nothing in the first "
                   f"{table.num_rows} records{hint}")
    return out


def warn(messages: list[str]) -> None:
    from evalkit.safetext import visible  # (a message quotes the data's own keys)

    for message in messages:
        print(f"evalkit: warning: {visible(message)}", file=sys.stderr)
