"""A sweep's console at 80 columns: one line per job and the closing table, which fits and
names each job by the override that differs (not a whole summary per job, nor Hydra's line
per job, nor a table twice the terminal's width)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.e2e
def test_a_sweep_at_80_columns_is_a_line_per_job_and_a_table_that_fits(tmp_path: Path) -> None:
    proc = run_cli("run", "-m", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5,0.8",
                   cwd=tmp_path, env={"COLUMNS": "80"})
    lines = proc.stdout.splitlines()
    jobs = [ln for ln in lines if re.match(r"job \d: run \S+ · 160 records · 40 excluded", ln)]
    assert len(jobs) == 2, proc.stdout
    assert not any(s in proc.stdout for s in ("judgments", "metrics (raw", "[HYDRA]"))
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert table and all(len(ln) <= 80 for ln in table), proc.stdout
    assert any("threshold=0.5" in ln for ln in table) and any("threshold=0.8" in ln
                                                               for ln in table)
    assert len(lines) <= len(jobs) + len(table) + 3  # the title and the "more metrics" hint
