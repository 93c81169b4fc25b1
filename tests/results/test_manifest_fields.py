"""A manifest is input: every field a reader takes from it (``report``, ``compare``, the
gates) has its type checked when it is loaded, so an odd one is one line naming the file and
the key, never a traceback from deep inside a reader. Before, 26 of 42 (field, value) pairs
below ended ``evalkit report`` or ``compare`` with an AttributeError, TypeError or
ValueError."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalkit.results.runfiles import RunFileError, load_manifest
from tests.conftest import quickstart_run

FIELDS = ["config", "excluded_by", "judgments", "judgment_errors", "judgments_cached",
          "offline_judges", "warnings", "judge_calls_unpriced"]
ODD = ["x\x1b[31m", 7, [1, "a"], {"a": "b"}, True, 1e308]
GOOD = {"config": {}, "excluded_by": {"level": 3}, "judgments": {"j": {"ok": 1}},
        "judgment_errors": {"j": {"timeout": 2}}, "judgments_cached": {"j": 4},
        "offline_judges": ["j"], "warnings": ["a field matched nothing"],
        "judge_calls_unpriced": 0}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quickstart_run(tmp_path_factory.mktemp("manifest"), "base")


def _with(run: Path, key: str, value: object) -> Path:
    import shutil

    odd = run.parent / "odd"
    shutil.rmtree(odd, ignore_errors=True)
    shutil.copytree(run, odd)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest[key] = value
    (odd / "manifest.json").write_text(json.dumps(manifest))
    return odd


# (each field with each odd value, but the two that are good values for their field)
@pytest.mark.parametrize("key, value", [
    pytest.param(k, v, id=f"{k}-{v!r}") for k in FIELDS for v in ODD
    if (k, v) not in (("config", {"a": "b"}), ("judge_calls_unpriced", 7))])
def test_an_odd_field_is_one_line_naming_it(run: Path, key: str, value: object) -> None:
    odd = _with(run, key, value)
    with pytest.raises(RunFileError) as caught:
        load_manifest(odd)
    message = str(caught.value)
    assert "\n" not in message and f"'{key}'" in message and "manifest.json" in message


@pytest.mark.parametrize("key", FIELDS)
def test_a_good_field_loads(run: Path, key: str) -> None:
    assert load_manifest(_with(run, key, GOOD[key]))[key] == GOOD[key]


@pytest.mark.parametrize("key", ["duration_s", "judge_cost_usd"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_number_is_finite(run: Path, key: str, value: float) -> None:
    with pytest.raises(RunFileError, match=f"'{key}'"):
        load_manifest(_with(run, key, value))  # (json writes NaN and Infinity; JSON has none)


@pytest.mark.e2e
def test_report_and_compare_say_so_in_one_line(run: Path) -> None:
    from tests.conftest import run_cli

    _with(run, "excluded_by", {"level": "many"})
    root = run.parents[2]
    for command in (["report", "odd"], ["compare", "base", "odd"]):
        proc = run_cli(*command, cwd=root, check=False)
        assert proc.returncode == 2, (command, proc.stderr)
        assert "Traceback" not in proc.stderr
        # (finding the run by id may warn about the same file first)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("evalkit: error: ") and "'excluded_by'" in last, proc.stderr


# the parts of the run's config that report, compare and the gates read (21 tracebacks before)
CONFIG_ODD = [(["runner"], "x"), (["metrics"], 7), (["metrics", "echo_rate"], [1]),
              (["alerts"], "x"), (["alerts"], [1, "a"]), (["alerts"], {"a": 1}),
              (["gates"], 7), (["runner", "max_judge_error_rate"], "x"),
              (["runner", "fail_on"], [1, "a"])]


@pytest.mark.parametrize("where, value", CONFIG_ODD, ids=repr)
def test_an_odd_config_is_one_line_naming_the_key(run: Path, where: list[str],
                                                  value: object) -> None:
    config = json.loads((run / "manifest.json").read_text())["config"]
    node = config
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(RunFileError) as caught:
        load_manifest(_with(run, "config", config))
    message = str(caught.value)
    assert "\n" not in message and f"'config.{'.'.join(where)}'" in message, message
