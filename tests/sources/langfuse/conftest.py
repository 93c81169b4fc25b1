"""Fixtures for the Langfuse source and sink: a fake Langfuse server per test (either API
generation), with keys in the environment, and a helper that runs the source alone."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))

from fake_server import (  # noqa: E402
    PUBLIC_KEY,
    SECRET_KEY,
    FakeLangfuse,
    _obs,
    make_dataset,
    parse,
)

from evalkit.context import RunContext
from evalkit.results.schemas import RECORDS, conform  # noqa: E402
from evalkit.sources.langfuse import LangfuseSource, LangfuseSourceConfig  # noqa: E402
from evalkit.testing import SourceRead, read_source  # noqa: E402

WINDOW = (datetime(2026, 5, 1, tzinfo=timezone.utc), datetime(2026, 5, 2, tzinfo=timezone.utc))
FROM, TO = "2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z"


def _serve(generation: str, monkeypatch: pytest.MonkeyPatch, n_traces: int = 40,
           **kwargs: Any) -> Iterator[FakeLangfuse]:
    server = FakeLangfuse(generation, **kwargs)
    server.info = make_dataset(server, n_traces, *WINDOW)
    url = server.start()
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("LANGFUSE_HOST", url)
    yield server
    server.stop()
    assert server.violations == [], "the fake answered outside the Langfuse spec"


@pytest.fixture(params=["v3", "v4"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[FakeLangfuse]:
    """A fake server of each API generation in turn."""
    yield from _serve(request.param, monkeypatch)


@pytest.fixture
def fake_v3(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    yield from _serve("v3", monkeypatch)


@pytest.fixture
def fake_v4(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    yield from _serve("v4", monkeypatch)


class Read:
    """What one read produced."""

    def __init__(self, source: LangfuseSource, got: SourceRead) -> None:
        self.source = source
        self.batches = got.batches
        self.records = pa.concat_tables([conform(t, RECORDS) for t in got.batches]) \
            if got.batches else RECORDS.empty_table()
        self.rejects = got.reject_rows
        self.imported = got.scores
        self.fingerprint = source.fingerprint()

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["record_id"]: r for r in self.records.to_pylist()}


def odd_observations() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two generations of trace-00001 outside the spec: a start time without an offset (Arrow's
    parser refuses it; the exact path reads it as UTC) and a level that fits no string
    column (a reject)."""
    t0 = parse("2026-05-01T10:00:00Z")
    naive = _obs("gen-naive-0", "trace-00001", "GENERATION", "llm-call", t0, t0, None,
                 "q", "a", 1)
    naive["startTime"] = "2026-05-01T10:00:00"
    bad_level = _obs("gen-badlevel-0", "trace-00001", "GENERATION", "llm-call", t0, t0, None,
                     "q", "a", 1)
    bad_level["level"] = 5
    return naive, bad_level


def make_source(tmp_path: Path, experiment: str = "lf", **overrides: Any
                ) -> tuple[LangfuseSource, RunContext]:
    cfg = replace(LangfuseSourceConfig(from_time=FROM, to_time=TO, progress=False,
                                       resolve_retry_s=0.0), **overrides)
    cfg.validate()
    ctx = RunContext(run_id="r1", experiment=experiment, run_dir=tmp_path / "runs" / "r1",
                     runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")
    return LangfuseSource("source", cfg, ctx), ctx


def read_all(tmp_path: Path, **overrides: Any) -> Read:
    """Run the source to the end with ``overrides`` on a default config (the test window)."""
    source, _ = make_source(tmp_path, **overrides)
    return Read(source, read_source(source.read()))
