"""The command line as a user meets it: help, Hydra's own options, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end


def test_top_level_help_lists_commands(tmp_path: Path) -> None:
    out = run_cli("--help", cwd=tmp_path).stdout
    for command in ("run", "query", "plugins"):
        assert command in out


def test_run_help_is_hydras_and_lists_config_groups(tmp_path: Path) -> None:
    out = run_cli("run", "--help", cwd=tmp_path).stdout
    assert "Configuration groups" in out or "== Config ==" in out
    for group in ("experiment", "filters", "judges", "metrics", "runner", "source"):
        assert group in out


def test_cfg_job_prints_the_composed_config_and_runs_nothing(tmp_path: Path) -> None:
    out = run_cli("run", "+experiment=quickstart", "judges.prompt_echo.threshold=0.5",
                  "--cfg", "job", cwd=tmp_path).stdout
    assert "experiment: quickstart" in out
    assert "plugin: pipeline_failure" in out
    assert "threshold: 0.5" in out
    assert not (tmp_path / "runs").exists()


def test_plugins_lists_builtins_and_the_plugin_distribution(tmp_path: Path) -> None:
    out = run_cli("plugins", cwd=tmp_path).stdout
    assert "pipeline_failure" in out and "prompt_echo" in out
    line = next(ln for ln in out.splitlines() if " refusal " in ln)
    assert "evalkit-refusal" in line


def test_key_typo_fails_in_one_line_with_the_fix(tmp_path: Path) -> None:
    proc = run_cli("run", "+experiment=quickstart", "+judges.prompt_echo.threshhold=0.5",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "judges.prompt_echo.threshhold" in err and "did you mean 'threshold'" in err
    assert "Traceback" not in proc.stderr


def test_wrong_type_names_key_value_and_expected_type(tmp_path: Path) -> None:
    proc = run_cli("run", "+experiment=quickstart", "judges.prompt_echo.threshold=high",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "judges.prompt_echo.threshold: 'high'" in proc.stderr
    assert "float" in proc.stderr


def test_unknown_plugin_says_did_you_mean_and_lists_installed(tmp_path: Path) -> None:
    proc = run_cli("run", "+experiment=quickstart", "judges.prompt_echo.plugin=prompt_ecco",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "judges.prompt_echo.plugin" in proc.stderr
    assert "did you mean 'prompt_echo'" in proc.stderr
    assert "installed:" in proc.stderr and "refusal" in proc.stderr


def test_missing_required_key_and_missing_file(tmp_path: Path) -> None:
    proc = run_cli("run", "source=jsonl", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "source.path" in proc.stderr and "required" in proc.stderr
    proc = run_cli("run", "source=jsonl", "source.path=nope/*.jsonl", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2
    assert "source.path: no JSONL file matches 'nope/*.jsonl'" in proc.stderr
    assert "Traceback" not in proc.stderr
    # plugins are built before the run directory: a config mistake leaves nothing behind
    assert run_dirs(tmp_path, "default") == []


def test_full_error_shows_the_traceback(tmp_path: Path) -> None:
    proc = run_cli("run", "source=jsonl", "source.path=nope.jsonl", cwd=tmp_path,
                   env={"EVALKIT_FULL_ERROR": "1"}, check=False)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_query_errors_are_one_line(tmp_path: Path) -> None:
    proc = run_cli("query", "select 1", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "no runs directory" in proc.stderr
