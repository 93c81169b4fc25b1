from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from evalkit.context import RunContext
from evalkit.testing import SourceRead, read_source


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    return RunContext(run_id="r1", experiment="t", run_dir=tmp_path / "run",
                      runs_dir=tmp_path, cache_dir=tmp_path / "cache")


def read(source) -> SourceRead:
    """Everything one read of ``source`` yields."""
    return read_source(source.read())


def read_all(source) -> pa.Table:
    """The records of one read of ``source``."""
    return read(source).table


class RejectsCtx(SimpleNamespace):
    """The run a test source reads for, and the rejects its reads yielded (as dicts)."""


def read_collecting(src) -> pa.Table:
    """The records of one read of ``src``; its rejects go to ``src.ctx.rejects``."""
    got = read_source(src.read())
    src.ctx.rejects.extend({"location": r.location, "reason": r.reason, "raw": r.raw}
                           for r in got.rejects)
    return got.table
