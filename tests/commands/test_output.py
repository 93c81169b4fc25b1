"""Readable listings at 80 columns: a table when it fits, one block per record when it does not,
names never cut in a pipe, numbers at sensible precision, and every machine format on every
listing command (query, plugins, compare)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evalkit.commands._output import table_lines, vertical_lines
from evalkit.numbers import number
from tests.conftest import run_cli

PIPE = {"COLUMNS": ""}  # a pipe with no width: what a script or `| less` gets


@pytest.mark.parametrize("value, text", [
    (8.86e-17, "0"), (-3e-15, "0"), (0.0, "0"), (1 / 3, "0.3333"), (0.05, "0.05"),
    (2.5e-6, "2.5e-06"), (1234.5678, "1235"), (123456.0, "123456"), (12345.67, "12345.7"),
    (3.2e9, "3200000000"), (math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf"),
])
def test_numbers_print_with_sensible_precision(value: float, text: str) -> None:
    assert number(value) == text


def test_a_table_that_does_not_fit_becomes_vertical() -> None:
    columns = ["metric", "value"]
    rows = [("level_x_flagged.not_flagged", 0.5), ("echo_rate", None)]
    lines = table_lines(columns, rows, width=80)
    assert lines is not None and lines[2].split() == ["level_x_flagged.not_flagged", "0.5"]
    assert table_lines(columns, rows, width=20) is None
    assert table_lines(columns, [("a\nb", 1)], width=None) is None  # line breaks: vertical
    block = vertical_lines(columns, rows)
    assert block[1].split() == ["metric", "level_x_flagged.not_flagged"]
    assert all(len(line) <= 80 for line in block)
    assert vertical_lines(["text"], [("one\ntwo",)])[1:] == ["text  one", "      two"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("project")
    run_cli("run", "+experiment=quickstart", "runner.summary=false", "runner.run_id=first",
            cwd=cwd)
    run_cli("run", "+experiment=quickstart", "runner.summary=false", "runner.run_id=second",
            "judges.prompt_echo.threshold=0.5", cwd=cwd)
    return cwd


def test_query_at_80_columns_is_vertical_and_cuts_nothing(project: Path) -> None:
    out = run_cli("query", "SELECT * FROM runs ORDER BY run_id", cwd=project,
                  env={"COLUMNS": "80"}).stdout
    assert out.startswith("-[ row 1 ]")
    assert "run_id           first" in out and "…" not in out
    assert out.rstrip().endswith("2 rows")


def test_names_are_never_cut_in_a_pipe(project: Path) -> None:
    out = run_cli("plugins", cwd=project, env=PIPE).stdout
    line = next(ln for ln in out.splitlines() if " tool_success_mismatch " in ln)
    assert "evalkit.judges.tool_success_mismatch:ToolSuccessMismatchJudge" in line
    out = run_cli("query", "SELECT DISTINCT metric FROM metrics WHERE metric LIKE "
                  "'latency%' ORDER BY 1", cwd=project, env=PIPE).stdout
    assert out.splitlines()[2:6] == ["latency.mean", "latency.p50", "latency.p95",
                                     "latency.p99"]


def _parse(fmt: str, text: str) -> list[dict]:
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(text)))
    if fmt == "json":
        return json.loads(text)
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    lines = text.splitlines()  # markdown
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert set(lines[1].replace("|", "").split()) == {"---"}
    return [dict(zip(head, (c.strip() for c in ln.strip("|").split("|")), strict=True))
            for ln in lines[2:]]


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "markdown"])
def test_every_listing_command_writes_every_format(project: Path, fmt: str) -> None:
    rows = _parse(fmt, run_cli("query", "SELECT run_id, n_records FROM runs ORDER BY run_id",
                               "--format", fmt, cwd=project).stdout)
    assert [r["run_id"] for r in rows] == ["first", "second"]
    rows = _parse(fmt, run_cli("plugins", "--kind", "sources", "--format", fmt,
                               cwd=project).stdout)
    assert {"jsonl", "csv", "langfuse"} <= {r["name"] for r in rows}
    rows = _parse(fmt, run_cli("plugins", "prompt_echo", "--format", fmt, cwd=project).stdout)
    assert {"threshold", "against"} <= {r["key"] for r in rows}
    rows = _parse(fmt, run_cli("compare", "first", "second", "--n-boot", "5", "--metric",
                               "echo_rate", "--format", fmt, cwd=project).stdout)
    assert {(r["metric"], r["slice"]) for r in rows} >= {("echo_rate", "all")}


def test_parquet_needs_a_file_and_writes_one(project: Path, tmp_path: Path) -> None:
    for args in (["query", "SELECT run_id FROM runs"], ["plugins"],
                 ["compare", "first", "second", "--n-boot", "5", "--metric", "echo_rate"]):
        out = tmp_path / f"{args[0]}.parquet"
        run_cli(*args, "--out", str(out), cwd=project)
        assert pq.read_table(out).num_rows > 0
        proc = run_cli(*args, "--format", "parquet", cwd=project, check=False)
        assert proc.returncode == 2 and "--out" in proc.stderr


def test_plugin_keys_with_types_defaults_and_meaning(project: Path) -> None:
    rows = json.loads(run_cli("plugins", "prompt_echo", "--format", "json",
                              cwd=project).stdout)
    threshold = next(r for r in rows if r["key"] == "threshold")
    assert threshold == {"kind": "judges", "key": "threshold", "type": "float",
                         "default": "0.9",
                         "meaning": "similarity at or above which the output is an echo"}
    proc = run_cli("plugins", "promt_echo", cwd=project, check=False)
    assert proc.returncode == 2 and "did you mean 'prompt_echo'" in proc.stderr


def test_query_run_latest_and_the_latest_view(project: Path) -> None:
    sql = "SELECT DISTINCT run_id FROM metrics"
    rows = json.loads(run_cli("query", sql, "--run", "latest", "--format", "json",
                              cwd=project).stdout)
    assert rows == [{"run_id": "second"}]
    rows = json.loads(run_cli("query", sql, "--run", "first", "--format", "json",
                              cwd=project).stdout)
    assert rows == [{"run_id": "first"}]
    rows = json.loads(run_cli("query", "SELECT run_id FROM latest", "--format", "json",
                              cwd=project).stdout)
    assert rows == [{"run_id": "second"}]


def test_an_empty_result_names_the_runs_directory_it_read(project: Path) -> None:
    proc = run_cli("query", "SELECT * FROM metrics WHERE metric = 'nope'", cwd=project)
    assert f"no rows; read 2 run(s) under {project.resolve() / 'runs'}/" in proc.stdout
    proc = run_cli("query", "SELECT * FROM metrics WHERE metric = 'nope'", "--format", "csv",
                   cwd=project)
    assert proc.stdout.strip().startswith("run_id,metric,plugin,slice,value")
    assert "no rows; read 2 run(s)" in proc.stderr
