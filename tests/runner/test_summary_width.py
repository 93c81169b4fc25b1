"""The run's summary at 80 columns: metric names are never broken mid-word; a table that
cannot hold them becomes a line (or two) per metric row."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

LONG = "echo_rate_of_genuine_completions_by_every_model"


def test_summary_at_80_columns_keeps_names_whole(tmp_path: Path) -> None:
    out = run_cli("run", "+experiment=quickstart",
                  f"+metrics.{LONG}={{plugin: rate, judge: prompt_echo}}", cwd=tmp_path,
                  env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    assert any(line.split()[:2] == [LONG, "[all]"] for line in lines), out
    assert any(line.startswith("echo_rate [all]  0.") for line in lines), out
    start = next(i for i, ln in enumerate(lines) if ln.startswith("metrics"))
    assert all(len(ln) <= 80 for ln in lines[start:start + 12])


def test_summary_keeps_its_table_when_it_fits(tmp_path: Path) -> None:
    out = run_cli("run", "+experiment=quickstart", cwd=tmp_path,
                  env={"COLUMNS": "120"}).stdout
    row = next(ln for ln in out.splitlines() if " echo_rate " in ln)
    assert "0.333" in row and "160/40/120/0" in row


def test_the_audit_summary_at_80_columns_is_a_line_or_two_per_metric(tmp_path: Path) -> None:
    out = run_cli("run", "+experiment=audit", cwd=tmp_path, env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("metrics"))
    rows = [ln for ln in lines[start:] if "[all]" in ln or "[level=" in ln or "[model=" in ln]
    assert len(rows) >= 40  # every metric row of the audit (slices on: summary_slices)
    assert len(lines) < 2 * len(rows) + 30, len(lines)  # was 7 lines a row: 312 in all
    assert all(len(ln) <= 80 for ln in rows)
