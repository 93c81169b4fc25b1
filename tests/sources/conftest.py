from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from evalkit.context import RunContext


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    return RunContext(run_id="r1", experiment="t", run_dir=tmp_path / "run",
                      runs_dir=tmp_path, cache_dir=tmp_path / "cache")


def read_all(source) -> pa.Table:
    tables = list(source.read())
    return pa.concat_tables(tables) if tables else pa.table({})
