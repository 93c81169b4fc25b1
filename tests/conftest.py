"""Shared fixtures: run the CLI the way a user does (a subprocess in a scratch directory),
with the judge cache and litellm's price list kept local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

EVALKIT = str(Path(sys.executable).with_name("evalkit"))

_SESSION_TMP: dict[str, str | None] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Everything the suite and the processes it starts put in the temporary directory
    (pytest's own base directory, sweeps' Hydra directories and status files, compare's
    scratch) goes into one directory of this session, removed when the session ends: the
    suite leaves nothing in $TMPDIR. ``--basetemp`` keeps pytest's directories where given."""
    import tempfile

    if _SESSION_TMP:
        return
    # multiprocessing's own directory (pymp-*) is made on first use under tempfile's and
    # removed at exit, after this session's is gone: made now, beside it, not inside
    import multiprocessing.util

    multiprocessing.util.get_temp_dir()
    made = tempfile.mkdtemp(prefix="evalkit-tests-")
    _SESSION_TMP.update(dir=made, before=os.environ.get("TMPDIR"),
                        cache_before=os.environ.get("EVALKIT_CACHE_DIR"))
    os.environ["TMPDIR"] = made
    tempfile.tempdir = made
    # the LLM response cache of runs made outside a test (session and module fixtures): this
    # session's, never ~/.cache/evalkit, where another suite's answers would be served
    os.environ["EVALKIT_CACHE_DIR"] = os.path.join(made, "cache")


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil
    import tempfile

    made = _SESSION_TMP.pop("dir", None)
    if made is None:
        return
    for name, key in (("TMPDIR", "before"), ("EVALKIT_CACHE_DIR", "cache_before")):
        before = _SESSION_TMP.pop(key, None)
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
    tempfile.tempdir = None
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EVALKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def fresh_engines():
    """The judge engines and response-cache handles are process-wide: a test that runs
    judges in-process starts without any and leaves none behind."""
    from evalkit.judges.llm import _cache, _engine

    _engine._ENGINES.clear()
    yield
    _engine._ENGINES.clear()
    for cache in _cache._CACHES.values():
        cache.close()
    _cache._CACHES.clear()


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """``evalkit ARGS`` in ``cwd``; fails the test with the output when ``check`` and the exit
    code is not 0."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([EVALKIT, *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        pytest.fail(f"evalkit {' '.join(args)} exited {proc.returncode}\n"
                    f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def quickstart_run(root: Path, run_id: str) -> Path:
    """A finished quickstart run made with ``root`` as the working directory (the Python
    API, in this process): its run directory ``root/runs/quickstart/RUN_ID``."""
    import contextlib

    import evalkit

    with contextlib.chdir(root):
        evalkit.run("quickstart", [f"runner.run_id={run_id}"])
    return root / "runs" / "quickstart" / run_id


def run_dirs(root: Path, experiment: str) -> list[Path]:
    """The run directories of ``experiment`` under ``root/runs``, oldest first: by the time
    each started (run ids made in the same second sort by their random part, not by time)."""
    base = root / "runs" / experiment
    if not base.is_dir():
        return []

    def started(path: Path) -> tuple[str, str]:
        try:
            return json.loads((path / "manifest.json").read_text())["started_at"], path.name
        except (OSError, ValueError, KeyError):
            return "", path.name

    return sorted((p for p in base.iterdir() if p.is_dir()), key=started)
