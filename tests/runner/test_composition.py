"""Hydra composition as users rely on it: multirun sweeps, and a ./conf of their own that
extends the built-in tree, from an editable and from a regular (wheel) install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end

ROOT = Path(__file__).resolve().parents[2]

USER_EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /filters: [pipeline_failure]
  - override /judges: [prompt_echo, strict_echo]
  - override /metrics: [echo_rate]
experiment: mine
source:
  path: data.jsonl
metrics:
  strict_rate: {plugin: rate, judge: strict_echo}
"""
USER_JUDGE = "strict_echo:\n  plugin: prompt_echo\n  threshold: 0.3\n"
ROWS = [
    {"input": "Summarize: the build is red since Tuesday", "output": "Build broken since Tue."},
    {"input": "Summarize: the build is red since Tuesday",
     "output": "Summarize: the build is red since Tuesday"},
    {"input": "Translate to French: good morning", "output": None, "level": "ERROR"},
]


def _user_project(cwd: Path) -> None:
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "conf" / "judges").mkdir()
    (cwd / "conf" / "experiment" / "mine.yaml").write_text(USER_EXPERIMENT)
    (cwd / "conf" / "judges" / "strict_echo.yaml").write_text(USER_JUDGE)
    (cwd / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))


def test_multirun_writes_one_run_per_job_and_one_query_compares(tmp_path: Path) -> None:
    run_cli("run", "-m", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5,0.95",
            "runner.summary=false", cwd=tmp_path)
    assert len(run_dirs(tmp_path, "quickstart")) == 2
    out = run_cli("query", "SELECT json_extract_string(r.config, '$.judges.prompt_echo.threshold')"
                  " AS threshold, m.value FROM runs r JOIN metrics m USING (run_id) "
                  "WHERE m.metric = 'echo_rate' AND m.slice = 'all' ORDER BY threshold",
                  "--format", "jsonl", cwd=tmp_path).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["threshold"] for r in rows] == ["0.5", "0.95"]
    # a looser threshold can only flag more outputs
    assert rows[0]["value"] >= rows[1]["value"]


def test_user_conf_extends_the_builtin_tree(tmp_path: Path) -> None:
    _user_project(tmp_path)
    out = run_cli("run", "+experiment=mine", cwd=tmp_path).stdout
    assert "records 3" in out and "excluded 1" in out
    (run,) = run_dirs(tmp_path, "mine")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["judgments"]["strict_echo"] == {"ok": 2, "skipped": 1}
    assert manifest["config"]["judges"]["strict_echo"]["threshold"] == 0.3


def test_user_conf_works_from_a_wheel_install(tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(ROOT)], check=True)
    project = tmp_path / "project"
    project.mkdir()
    _user_project(project)
    env = {"PYTHONPATH": str(site)}
    where = subprocess.run([sys.executable, "-c", "import evalkit; print(evalkit.__file__)"],
                           cwd=project, env={**os.environ, **env}, capture_output=True,
                           text=True, check=True).stdout
    assert where.startswith(str(site)), where  # the installed copy, not the checkout
    run_cli("run", "+experiment=mine", cwd=project, env=env)
    assert len(run_dirs(project, "mine")) == 1


@pytest.mark.parametrize("override", ["runner.fail_on=error", "runner.fail_on=warning"])
def test_fail_on_gates_the_exit_code(tmp_path: Path, override: str) -> None:
    # the quickstart's echo alert is a warning: error passes, warning fails the run
    proc = run_cli("run", "+experiment=quickstart", override, cwd=tmp_path, check=False)
    assert proc.returncode == (0 if override.endswith("error") else 3), proc.stderr


def test_multirun_sweeps_a_user_experiment_from_a_user_conf(tmp_path: Path) -> None:
    # with a ./conf, the search-path override once went before -m: "unrecognized arguments"
    _user_project(tmp_path)
    run_cli("run", "-m", "+experiment=mine", "judges.strict_echo.threshold=0.3,0.9",
            "runner.summary=false", cwd=tmp_path)
    runs = run_dirs(tmp_path, "mine")
    thresholds = sorted(json.loads((r / "manifest.json").read_text())["config"]["judges"]
                        ["strict_echo"]["threshold"] for r in runs)
    assert thresholds == [0.3, 0.9]


@pytest.mark.parametrize(("argv", "expected"), [
    (["-m", "+e=x", "a=1"], ["-m", "O", "+e=x", "a=1"]),
    (["+e=x", "-m"], ["O", "+e=x", "-m"]),
    (["--cfg", "job", "+e=x"], ["--cfg", "job", "O", "+e=x"]),
    (["-cn", "config", "--multirun", "a=1,2"], ["-cn", "config", "--multirun", "O", "a=1,2"]),
    (["--info", "searchpath"], ["--info", "searchpath", "O"]),
    (["--info", "+e=x"], ["--info", "O", "+e=x"]),
    (["-m"], ["-m", "O"]),
    ([], ["O"]),
])
def test_the_search_path_override_joins_the_overrides(argv: list[str],
                                                      expected: list[str]) -> None:
    from evalkit.runner.app import with_override

    assert with_override(argv, "O") == expected
