"""Reading a source the way a run does and the plain way, for the reliability tests."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.context import RunContext
from evalkit.plugin import SourceItem
from evalkit.results.schemas import RECORDS, conform
from evalkit.sources._jsonl_reference import read_plainly
from evalkit.sources.csv import CsvSource
from evalkit.sources.files import FileSourceConfig
from evalkit.sources.jsonl import JsonlSource, JsonlSourceConfig
from evalkit.testing import read_source

Read = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]


def context(tmp: Path) -> RunContext:
    return RunContext(run_id="r1", experiment="t", run_dir=tmp / "run", runs_dir=tmp,
                      cache_dir=tmp / "cache")


def _line(reject: dict[str, Any]) -> tuple[str, int, str]:
    """File order (and for two rejects at one line, as damaged data can give: by reason)."""
    where, line = reject["location"].rsplit(":", 1)
    return where, int(line), reject["reason"]


def _collect(items: Iterable[SourceItem]) -> Read:
    got = read_source(items)
    # as the runner takes them: every record column, in the schema's order
    records = pa.concat_tables([conform(t, RECORDS) for t in got.batches]).to_pylist() \
        if got.batches else []
    return records, sorted(got.reject_rows, key=_line), got.scores


def read_jsonl(path: Path | str, tmp: Path, **options: Any) -> Read:
    """Records, rejects (in file order) and imported scores of a run's read."""
    ctx = context(tmp)
    source = JsonlSource("s", JsonlSourceConfig(path=str(path), **options), ctx)
    return _collect(source.read())


def read_jsonl_plainly(path: Path | str, tmp: Path, **options: Any) -> Read:
    """The same, read by the plain reference reader (one line at a time)."""
    options.pop("workers", None)
    return _collect(read_plainly("s", FileSourceConfig(path=str(path), **options)))


def read_jsonl_checked(path: Path | str, tmp: Path, **options: Any) -> Read:
    """A run's read, checked equal to the plain reader's."""
    got = read_jsonl(path, tmp, **options)
    assert got == read_jsonl_plainly(path, tmp, **options)
    return got


def read_csv(path: Path | str, tmp: Path, **options: Any) -> Read:
    ctx = context(tmp)
    source = CsvSource("s", FileSourceConfig(path=str(path), **options), ctx)
    return _collect(source.read())
