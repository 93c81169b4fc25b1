"""``repeatability`` on constructed repeats with known answers: flip rate, Fleiss' kappa
(statsmodels as the oracle), within-record spread and the clustered rate; and runs with
``runner.repeats``: every repeat stored, each keyed apart in the cache, priced in a dry run,
and the judgments table (so every existing query) unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from evalkit.metrics.repeatability import (
    RepeatabilityConfig,
    RepeatabilityMetric,
    fleiss_kappa,
)
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import run_connection, write_parquet


def test_fleiss_kappa_matches_statsmodels():
    rng = np.random.default_rng(2)
    for m in (2, 3, 5):
        for p in (0.2, 0.5):
            first = rng.random((40, 1)) < p
            noise = rng.random((40, m)) < 0.2
            ratings = first ^ noise
            counts = np.stack([ratings.sum(axis=1), m - ratings.sum(axis=1)], axis=1)
            assert fleiss_kappa(counts) == pytest.approx(sm_fleiss(counts), abs=1e-12)
    assert np.isnan(fleiss_kappa(np.array([[3, 0], [3, 0]])))


def write_repeats(run_dir: Path, flags: list[list[bool]], values=None) -> Path:
    """Record i judged len(flags[i]) times by judge 'g', repeat r flagging flags[i][r]."""
    (run_dir / "judgments").mkdir(parents=True)
    ids = [f"r{i:02d}" for i in range(len(flags))]
    write_parquet(conform([{"run_id": "x", "record_id": r, "model": "ab"[i % 2]}
                           for i, r in enumerate(ids)], RECORDS), run_dir / "records.parquet")
    k = max(len(f) for f in flags)
    for rep in range(k):
        rows = [{"run_id": "x", "record_id": ids[i], "judge": "g", "status": "ok",
                 "passed": not f[rep], "repeat": rep,
                 "value": None if values is None else values[i][rep]}
                for i, f in enumerate(flags) if rep < len(f)]
        name = "part-00000.parquet" if rep == 0 else f"repeat-00000-{rep:03d}.parquet"
        write_parquet(conform(rows, JUDGMENTS), run_dir / "judgments" / name)
    return run_dir


def rows_of(run_dir: Path, **config) -> dict:
    cfg = RepeatabilityConfig(judge="g", n_boot=200, **config)
    con = run_connection(run_dir)
    return {(r["metric"], r["slice"]): r
            for r in RepeatabilityMetric("rep", cfg, None).compute(con)}


def test_known_flips_kappa_spread_and_a_clustered_rate(tmp_path):
    # 10 records × 3 repeats: 3 records flip; 2 are always flagged
    flags = [[True] * 3, [True] * 3, [True, False, True], [False, True, False],
             [False, False, True]] + [[False] * 3] * 5
    values = [[0.9, 0.8, 0.7]] + [[0.5, 0.5, 0.5]] * 9
    rows = rows_of(write_repeats(tmp_path / "run", flags, values), slice_by=["model"])
    flip = rows[("rep.flip_rate", "all")]
    assert flip["value"] == pytest.approx(0.3) and flip["n_judged"] == 10
    counts = np.array([[sum(f), 3 - sum(f)] for f in flags])
    assert rows[("rep.kappa", "all")]["value"] == pytest.approx(sm_fleiss(counts))
    assert rows[("rep.spread", "all")]["value"] == pytest.approx(0.1 / 10)
    rate = rows[("rep.rate", "all")]
    assert rate["value"] == pytest.approx(sum(map(sum, flags)) / 30)
    # the interval resamples records (clusters of 3), so it is wider than 30 draws would be
    assert rate["ci_low"] < rate["value"] < rate["ci_high"]
    assert ("rep.flip_rate", "model=a") in rows


def test_one_judgment_per_record_says_to_repeat(tmp_path):
    rows = rows_of(write_repeats(tmp_path / "run", [[True], [False]]))
    row = rows[("rep.flip_rate", "all")]
    assert row["value"] is None
    assert "runner.repeats=2" in json.dumps(row["details"])


@pytest.mark.e2e
def test_runner_repeats_store_every_repeat_and_keep_judgments_as_they_were(tmp_path,
                                                                            monkeypatch):
    import evalkit

    monkeypatch.chdir(tmp_path)
    plain = evalkit.run("quickstart", ["source.limit=30", "runner.run_id=one"])
    rep = evalkit.run("quickstart", [
        "source.limit=30", "runner.run_id=three", "runner.repeats=3",
        "runner.judge_repeats={refusal: 2}",
        "+metrics.rep={plugin: repeatability, judge: prompt_echo}"])
    con = evalkit.connect("runs")
    by_judge = dict(con.sql("SELECT judge, count(*) FROM repeats WHERE run_id = 'three' "
                            "GROUP BY judge").fetchall())
    judged = con.sql("SELECT count(*) FROM judgments WHERE run_id = 'three' AND judge = "
                     "'prompt_echo' AND status = 'ok'").fetchone()[0]
    assert by_judge == {"prompt_echo": 2 * judged, "refusal": judged}
    same = con.sql("SELECT count(*) FROM metrics a JOIN metrics b USING (metric, slice) "
                   "WHERE a.run_id = 'one' AND b.run_id = 'three' AND a.value IS DISTINCT "
                   "FROM b.value").fetchone()[0]
    assert same == 0  # every metric of the plain run, unchanged by the repeats
    rows = {r["metric"]: r for r in rep.metrics.to_pylist() if r["slice"] == "all"}
    assert rows["rep.flip_rate"]["value"] == 0  # a deterministic judge never flips
    assert rows["rep.kappa"]["value"] == 1 and plain.run_dir.name == "one"


def test_a_rate_with_no_flag_keeps_a_width_as_every_clustered_proportion(tmp_path):
    """0 of 12 judgments flagged resampled to [0, 0]: the flag rate is a proportion pooled
    over records, and takes Wilson's interval at its effective size, as citation precision
    does (at 0 or 1 that size is the number of judgments)."""
    from evalkit.metrics._intervals import clustered_proportion_ci

    none = rows_of(write_repeats(tmp_path / "none", [[False] * 3] * 4), threshold=None)
    rate = none[("rep.rate", "all")]
    assert rate["value"] == 0.0
    assert (rate["ci_low"], rate["ci_high"]) == pytest.approx(wilson(0, 12))
    assert rate["details"]["ci_method"] == "wilson (effective n)"
    flags = [[True] * 3, [True, False, True], [False] * 3, [False, True, False]] * 3
    some = rows_of(write_repeats(tmp_path / "some", flags))[("rep.rate", "all")]
    sums = np.array([sum(f) for f in flags])
    assert (some["ci_low"], some["ci_high"]) == pytest.approx(
        clustered_proportion_ci(sums, np.full(len(flags), 3)))


def test_a_value_without_an_interval_says_why_and_n_boot_0_turns_every_one_off(tmp_path):
    one = rows_of(write_repeats(tmp_path / "one", [[True, False]], [[0.2, 0.7]]))
    for stat in ("kappa", "spread"):
        row = one[(f"rep.{stat}", "all")]
        assert row["value"] is not None and row["ci_low"] is None
        assert "one record" in row["details"]["ci_open"], stat
        assert "ci_method" not in row["details"], stat
    run = write_repeats(tmp_path / "off", [[True, False], [False, False], [True, True]],
                        [[0.2, 0.7], [0.1, 0.3], [0.9, 0.6]])
    cfg = RepeatabilityConfig(judge="g", n_boot=0)
    for row in RepeatabilityMetric("rep", cfg, None).compute(run_connection(run)):
        assert row["ci_low"] is None and row["ci_high"] is None, row["metric"]
        assert "ci_open" not in row["details"] and "ci_method" not in row["details"]


def test_a_spread_of_zero_everywhere_has_no_interval_of_no_width(tmp_path):
    same = rows_of(write_repeats(tmp_path / "same", [[True, True]] * 4,
                                 [[0.4, 0.4]] * 4))[("rep.spread", "all")]
    assert same["value"] == 0.0 and same["ci_low"] is None
    assert "no spread" in same["details"]["ci_open"]


def wilson(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    return proportion_confint(k, n, method="wilson")
