"""A limits directory (EVALKIT_LIMITS_DIR) or response cache (runner.cache_dir,
EVALKIT_CACHE_DIR) that cannot be written stops the run before anything is judged: one line
naming the setting, exit 2; not every judgment an error and exit 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e  # runs evalkit end to end


@pytest.mark.parametrize(("env", "name"), [
    ({"EVALKIT_LIMITS_DIR": "/proc/evalkit-nope"}, "EVALKIT_LIMITS_DIR"),
    ({"EVALKIT_CACHE_DIR": "/proc/evalkit-nope"}, "cache_dir"),
])
def test_an_unwritable_shared_dir_is_a_one_line_error(tmp_path: Path, env: dict[str, str],
                                                      name: str) -> None:
    proc = run_cli("run", "+experiment=llm_judge", "source.limit=2", "runner.summary=false",
                   cwd=tmp_path, check=False,
                   env={"EVALKIT_JUDGE_API_BASE": "http://127.0.0.1:9/v1", **env})
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("evalkit: error:")]
    assert len(lines) == 1 and name in lines[0] and "/proc/evalkit-nope" in lines[0]
