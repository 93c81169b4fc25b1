"""Fixtures of the reliability suite's judge tests: a fake model server, isolated engines
and caches, a run context under the test's tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalkit import redact
from evalkit.context import RunContext
from evalkit.judges.llm import _cache, _engine
from tests.reliability.judge_support import FakeLLMServer


@pytest.fixture
def server():
    """A running fake model server on 127.0.0.1."""
    s = FakeLLMServer().start()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def fresh_engines():
    """Engines, cache handles and registered secrets are process-wide: each test starts
    without any and leaves none behind (nor secret overrides in the environment)."""
    _engine._ENGINES.clear()
    yield
    _engine._ENGINES.clear()
    for cache in _cache._CACHES.values():
        cache.close()
    _cache._CACHES.clear()
    redact._registered.clear()
    for name in [k for k in os.environ if k.startswith(redact.OVERRIDE_ENV)]:
        del os.environ[name]


@pytest.fixture
def ctx_dir(tmp_path: Path) -> RunContext:
    """A run context whose run and cache directories are under the test's tmp_path."""
    return RunContext(run_id="test-run", experiment="test", run_dir=tmp_path / "run",
                      runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")


@pytest.fixture(scope="session")
def shard_runs_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory holding the two shards of one quickstart run (``0/2``, ``1/2``), each
    with several judgment parts (batches of 40): made once, copied by :func:`shard_runs`."""
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("shard-runs")
    run_cli("run", "-m", "+experiment=quickstart", "source.shard=0/2,1/2",
            "+source.batch_size=40", "runner.summary=false", cwd=root)
    return root / "runs"


@pytest.fixture
def shard_runs(shard_runs_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of :func:`shard_runs_template` under ``tmp_path/runs``."""
    import shutil

    shutil.copytree(shard_runs_template, tmp_path / "runs", symlinks=True)
    return tmp_path / "runs"
