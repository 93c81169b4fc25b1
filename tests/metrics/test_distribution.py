import numpy as np
import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics.distribution import DistributionConfig, DistributionMetric
from tests.metrics.run_tables import rows_by
from tests.metrics.run_tables import run_dir_connection as connect

VALUES = [i / 99 for i in range(100)]
RECS = [{"record_id": str(i), "model": "a" if i % 2 else "b", "latency_s": float(i),
         "excluded_by": "f" if i >= 90 else None} for i in range(100)]
JUDG = [{"record_id": str(i), "judge": "J", "value": v, "status": "ok"}
        for i, v in enumerate(VALUES)]


def test_judge_values_over_included_records(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    rows = rows_by(DistributionMetric("d", DistributionConfig(judge="J", bins=5, range=[0, 1]),
                                      None).compute(con))
    included = np.array(VALUES[:90])
    main = rows[("d", "all")]
    assert main["value"] == pytest.approx(included.mean())
    assert rows[("d.p50", "all")]["value"] == pytest.approx(np.quantile(included, 0.5))
    assert rows[("d.p95", "all")]["value"] == pytest.approx(np.quantile(included, 0.95))
    assert rows[("d.std", "all")]["value"] == pytest.approx(included.std(ddof=1))
    hist = main["details"]["histogram"]
    assert [b["count"] for b in hist] == list(np.histogram(included, 5, (0, 1))[0])
    assert sum(b["count"] for b in hist) == 90 == main["n_judged"]
    assert main["n_excluded"] == 10
    assert rows[("d.p50", "all")]["ci_low"] <= rows[("d.p50", "all")]["value"] <= \
        rows[("d.p50", "all")]["ci_high"]


def test_record_column_all_records_and_slices(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    rows = rows_by(DistributionMetric("lat", DistributionConfig(
        column="latency_s", included_only=False, slice_by=["model"], n_boot=0), None)
        .compute(con))
    assert rows[("lat.p95", "all")]["value"] == pytest.approx(np.quantile(np.arange(100), .95))
    assert rows[("lat", "model=a")]["value"] == pytest.approx(np.arange(1, 100, 2).mean())
    assert rows[("lat", "all")]["ci_low"] is None


def test_constant_and_empty(tmp_path):
    con = connect(tmp_path, [{"record_id": "x"}, {"record_id": "y"}],
                  [{"record_id": "x", "judge": "J", "value": 0.5, "status": "ok"},
                   {"record_id": "y", "judge": "J", "status": "error"}])
    rows = rows_by(DistributionMetric("d", DistributionConfig(judge="J"), None).compute(con))
    assert rows[("d", "all")]["value"] == 0.5
    assert rows[("d.std", "all")]["value"] is None  # one value: no spread
    assert rows[("d", "all")]["n_unscored"] == 1
    empty = DistributionMetric("d", DistributionConfig(judge="nobody"), None).compute(con)
    assert empty[0]["value"] is None and "undefined" in empty[0]["details"]


@pytest.mark.parametrize("cfg, message", [
    ({}, "exactly one of judge or column"),
    ({"column": "model"}, "not a numeric record column"),
    ({"judge": "J", "range": [1, 0]}, "range"),
    ({"judge": "J", "bins": 0}, "bins"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("metrics", "d", {"plugin": "distribution", **cfg}, "metrics.d")


@pytest.mark.parametrize("n", [2, 20, 40])
def test_a_quantile_bound_left_open_says_why_as_latencys_does(tmp_path, n):
    """The p95 of a few values has no upper bound in the data: the row said nothing of it
    (the order-statistic interval's reason was dropped), where latency's p95 says it."""
    from evalkit.metrics.latency import LatencyConfig, LatencyMetric

    recs = [{"record_id": str(i), "latency_s": (i * 37 % n) / n} for i in range(n)]
    judg = [{"record_id": str(i), "judge": "J", "value": (i * 37 % n) / n, "status": "ok"}
            for i in range(n)]
    con = connect(tmp_path, recs, judg)
    rows = rows_by(DistributionMetric("d", DistributionConfig(judge="J"), None).compute(con))
    latency = rows_by(LatencyMetric("l", LatencyConfig(percentiles=[50.0, 95.0]),
                                    None).compute(con))
    for q in ("p50", "p95"):
        mine, theirs = rows[(f"d.{q}", "all")], latency[(f"l.{q}", "all")]
        assert (mine["ci_low"], mine["ci_high"]) == (theirs["ci_low"], theirs["ci_high"])
        assert mine["details"].get("ci_open") == theirs["details"].get("ci_open"), q
        if None in (mine["ci_low"], mine["ci_high"]):
            assert mine["details"]["ci_open"], q


def test_every_interval_names_its_method_as_docs_metrics_says(tmp_path):
    """The distribution's rows had intervals and no details.ci_method (latency's say
    "order statistics" and the mean's method)."""
    from evalkit.metrics._stats import mean_ci

    con = connect(tmp_path, RECS, JUDG)
    rows = rows_by(DistributionMetric("d", DistributionConfig(judge="J"), None).compute(con))
    assert rows[("d", "all")]["details"]["ci_method"] == mean_ci(np.array(VALUES[:90]))[2]
    for q in ("p50", "p95"):
        assert rows[(f"d.{q}", "all")]["details"]["ci_method"] == "order statistics"


def test_the_disagreement_share_names_wilson(tmp_path):
    import types

    from evalkit.metrics.disagreements import DisagreementsConfig, DisagreementsMetric
    from tests.metrics.run_tables import pairs

    metric = DisagreementsMetric("dis", DisagreementsConfig(judge_a="A", judge_b="B"),
                                 types.SimpleNamespace(run_dir=str(tmp_path)))
    (row,) = [r for r in metric.compute(pairs([0.1, 0.9, 0.8, 0.2], [0.2, 0.1, 0.9, 0.3]))
              if r["slice"] == "all"]
    assert row["ci_low"] is not None and row["details"]["ci_method"] == "wilson"

