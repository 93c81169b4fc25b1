"""Fixtures of the LLM judge tests: a fake OpenAI-compatible server on 127.0.0.1, a run
context whose cache lives in a temporary directory, and helpers to run a judge on records."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any litellm import

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from fake_llm_server import FakeLLMServer  # noqa: E402

from evalkit.context import RunContext  # noqa: E402


@pytest.fixture
def fake_llm():
    """A running fake server; ``fake_llm.url`` is its api_base."""
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_engines(fresh_engines):
    """Engines and cache handles are process-wide: isolate tests from each other."""
    yield


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    return RunContext(run_id="test-run", experiment="test", run_dir=tmp_path / "run",
                      runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")
