from __future__ import annotations

from pathlib import Path

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
