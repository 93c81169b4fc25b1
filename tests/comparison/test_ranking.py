"""Ranking runs that are not shadow runs: only when ``sweep.rank_by`` asks, over the whole
runs, with the pair's test as ``compare`` gives it; a metric the runs do not have is one
error naming what they have."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalkit
from evalkit.comparison import compare_runs, rank_runs, rank_sweep
from evalkit.errors import EvalkitError


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    import os

    root = tmp_path_factory.mktemp("ranking")
    here = os.getcwd()
    os.chdir(root)
    try:
        out = {}
        for rank_by in ("null", "echo_rate"):
            out[rank_by] = [evalkit.run("quickstart", [
                f"judges.prompt_echo.threshold={t}", f"sweep.rank_by={rank_by}"]).run_dir.resolve()
                for t in (0.9, 0.5)]
        return out
    finally:
        os.chdir(here)


def test_runs_that_are_not_shadow_runs_are_ranked_only_when_asked(runs) -> None:
    assert rank_sweep(runs["null"]) is None
    ranking = rank_sweep(runs["echo_rate"], n_boot=50)
    assert ranking is not None and ranking.side is None and not ranking.higher_is_better
    values = [r.value for r in ranking.runs]
    assert values == sorted(values) and values[0] < values[1]  # a higher threshold flags less
    (pair,) = ranking.pairs
    first, second = (r.run_dir for r in ranking.runs)
    row = next(r for r in compare_runs(first, second, only=["echo_rate"], correction="none",
                                       n_boot=50, max_boot=400).rows
               if (r["metric"], r["slice"]) == ("echo_rate", "all"))
    assert (pair["p_value"], pair["delta"]) == (row["p_value"], row["delta"])
    assert pair["p_adjusted"] == pair["p_value"]  # one pair: nothing to correct
    assert [r.rank for r in ranking.runs] == (["1", "2"] if pair["significant"] else
                                              ["1–2", "1–2"])


def test_a_metric_the_runs_do_not_have_is_one_error(runs) -> None:
    with pytest.raises(EvalkitError, match="has no metric 'nope'"):
        rank_runs(runs["null"], "nope")
    with pytest.raises(EvalkitError, match="writes no row 'latency'.*latency.p95"):
        rank_runs(runs["null"], "latency")


def test_a_bad_sweep_setting_is_one_config_error() -> None:
    from evalkit.errors import ConfigError

    with pytest.raises(ConfigError, match="sweep.correction"):
        evalkit.run("quickstart", ["sweep.correction=bonferroni"])
    with pytest.raises(ConfigError, match="sweep.rank_on: unknown key.*rank_by"):
        evalkit.run("quickstart", ["+sweep.rank_on=echo_rate"])


def test_a_run_that_did_not_finish_is_listed_last_unranked(runs, tmp_path: Path) -> None:
    import json
    import shutil

    first, second = runs["echo_rate"]
    stopped = tmp_path / "runs" / "quickstart" / "stopped"
    shutil.copytree(first, stopped)
    manifest = json.loads((stopped / "manifest.json").read_text())
    (stopped / "manifest.json").write_text(json.dumps({**manifest, "run_id": "stopped",
                                                       "status": "interrupted"}))
    ranking = rank_runs([stopped, first, second], "echo_rate", n_boot=20)
    assert [r.run_id for r in ranking.runs][-1] == "stopped"
    last = ranking.runs[-1]
    assert (last.rank, last.value, last.note) == ("—", None, "not ranked: status interrupted")
    assert len(ranking.pairs) == 1  # the finished two only
