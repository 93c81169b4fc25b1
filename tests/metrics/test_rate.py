import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics.rate import RateConfig, RateMetric
from tests.metrics.run_tables import rows_by
from tests.metrics.run_tables import run_dir_connection as connect

RECS = [{"record_id": str(i), "level": "ERROR" if i < 4 else "DEFAULT",
         "excluded_by": "pipeline_failure" if i < 4 else None} for i in range(10)]
JUDG = [{"record_id": str(i), "judge": "H", "value": 0.95 if i < 7 else 0.1,
         "passed": i >= 7, "label": "failure" if i < 2 else "ok", "status": "ok"}
        for i in range(10)]


def test_threshold_passed_and_labels(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    thr = rows_by(RateMetric("r", RateConfig(judge="H", threshold=0.5), None).compute(con))
    assert thr[("r.raw", "all")]["value"] == pytest.approx(0.7)
    assert thr[("r", "all")]["value"] == pytest.approx(3 / 6)
    assert thr[("r.filter_effect", "all")]["value"] == pytest.approx(0.7 - 0.5)
    passed = rows_by(RateMetric("r", RateConfig(judge="H"), None).compute(con))
    assert passed[("r", "all")]["value"] == thr[("r", "all")]["value"]
    labels = rows_by(RateMetric("r", RateConfig(judge="H", labels=["failure"]), None)
                     .compute(con))
    assert labels[("r.raw", "all")]["value"] == pytest.approx(0.2)
    assert labels[("r", "all")]["value"] == 0.0


def test_slices_by_level(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    rows = rows_by(RateMetric("r", RateConfig(judge="H", threshold=0.5, slice_by=["level"]),
                              None).compute(con))
    assert rows[("r.raw", "level=ERROR")]["value"] == 1.0
    assert rows[("r", "level=ERROR")]["value"] is None  # every ERROR record is excluded
    assert rows[("r", "level=DEFAULT")]["n_judged"] == 6


@pytest.mark.parametrize("cfg, message", [
    ({"threshold": 0.5, "labels": ["x"]}, "threshold or labels"),
    ({"labels": []}, "labels: an empty list"),
    ({"slice_by": ["nope"]}, "slice_by"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("metrics", "r", {"plugin": "rate", "judge": "H", **cfg}, "metrics.r")


def test_metrics_of_one_connection_share_a_judge_join_and_no_other(tmp_path):
    """A rate and a mean of the same judge and slices on one connection use one join; another
    connection (another run) gets its own, never the first run's."""
    from evalkit.metrics import _judged
    from evalkit.metrics._judged import JudgeMetricConfig as MeanConfig
    from evalkit.metrics.mean import MeanMetric

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    con = connect(tmp_path / "a", RECS, JUDG)
    queries = []
    real = _judged._load
    _judged._load = lambda *a: queries.append(1) or real(*a)
    try:
        rate = rows_by(RateMetric("r", RateConfig(judge="H", threshold=0.5), None).compute(con))
        mean = rows_by(MeanMetric("m", MeanConfig(judge="H"), None).compute(con))
        other = connect(tmp_path / "b", RECS, [{**j, "value": 0.0} for j in JUDG])
        mean_b = rows_by(MeanMetric("m", MeanConfig(judge="H"), None).compute(other))
    finally:
        _judged._load = real
    assert len(queries) == 2  # run a: one join for both metrics; run b: its own
    assert rate[("r.raw", "all")]["value"] == pytest.approx(0.7)
    assert mean[("m.raw", "all")]["value"] == pytest.approx((7 * 0.95 + 3 * 0.1) / 10)
    assert mean_b[("m.raw", "all")]["value"] == 0.0


def test_an_accuracy_is_one_setting_away_and_the_row_says_what_it_counts(tmp_path):
    # exact_match got 1 of 4 right: the default rate counts the misses (0.75), said so
    from evalkit.judges.exact_match import ExactMatchConfig, ExactMatchJudge
    from evalkit.results.schemas import RECORDS, conform

    recs = [{"record_id": str(i), "output": out, "reference": "Paris"}
            for i, out in enumerate(["Paris", "Lyon", "Nice", "Lille"])]
    judged = ExactMatchJudge("exact", ExactMatchConfig(), None).judge(
        conform(recs, RECORDS)).to_pylist()
    judg = [{**j, "judge": "exact"} for j in judged]
    con = connect(tmp_path, recs, judg)
    misses = RateMetric("acc", RateConfig(judge="exact", raw=False), None)
    (row,) = misses.compute(con)
    assert row["value"] == 0.75 and misses.higher_is_better is False
    assert row["details"]["what"] == ("share of judge 'exact' judgments flagged "
                                      "(passed = false)")
    accuracy = RateMetric("acc", RateConfig(judge="exact", raw=False, count="passed"), None)
    (row,) = accuracy.compute(con)
    assert row["value"] == 0.25 and accuracy.higher_is_better is True
    assert row["details"]["what"].startswith("share of judge 'exact' judgments not flagged")
