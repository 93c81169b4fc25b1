"""The test suite leaves nothing in $TMPDIR: pytest's base directory, sweeps' Hydra
directories and status files all go into one directory of the session, removed at its end
(tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_a_run_of_the_suite_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}
    # a sweep (Hydra's sweep directory, the status and report files) and tmp_path fixtures
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/runner/test_sweep_console.py",
                           "tests/sources/test_field_transforms.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(os.listdir(tmp)) == []


@pytest.fixture(scope="session")
def cache_seen_by_session_fixtures() -> str | None:
    # (a session fixture is set up before the per-test cache of tests/conftest.py)
    return os.environ.get("EVALKIT_CACHE_DIR")


def test_session_fixtures_never_share_the_users_response_cache(
        cache_seen_by_session_fixtures: str | None) -> None:
    # runs a session fixture makes (the report's, against a fake judge on a port the OS may
    # hand out again) must not read answers another test or an earlier suite left in
    # ~/.cache/evalkit: a cached answer is not bought, and a run counted 0 unpriced calls
    seen = cache_seen_by_session_fixtures
    assert seen is not None and Path(seen).resolve().is_relative_to(
        Path(os.environ["TMPDIR"]).resolve())


@pytest.mark.e2e
def test_multiprocessing_temp_dirs_outlive_the_session_directory(tmp_path: Path) -> None:
    # multiprocessing makes its pymp-* directory under tempfile's directory on first use and
    # removes it at exit; made inside the session's directory, which pytest_unconfigure
    # removes first, its removal at exit printed a FileNotFoundError traceback under CI
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    case = tmp_path / "test_uses_multiprocessing.py"
    case.write_text("import multiprocessing.util\n\n\ndef test_it():\n"
                    "    assert multiprocessing.util.get_temp_dir()\n")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "tests.conftest", "--rootdir", str(tmp_path), str(case)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert sorted(os.listdir(tmp)) == []
