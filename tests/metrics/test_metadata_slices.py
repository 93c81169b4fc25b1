"""``slice_by: [metadata.<key>]``: every slicing metric splits by a key of the records'
metadata, as it does by a record column."""

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics.distribution import DistributionConfig, DistributionMetric
from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from evalkit.metrics.mean import MeanMetric
from evalkit.metrics.rate import RateConfig, RateMetric
from evalkit.metrics.task_completion import OutcomeConfig, TaskCompletionMetric
from tests.metrics.run_tables import rows_by
from tests.metrics.run_tables import run_dir_connection as connect

TASKS = ["billing", "support", "billing", "support", None, "billing"]
RECS = [{"record_id": str(i), "latency_s": float(i),
         "outcome": "success" if i % 2 else "failure",
         "metadata": {"task": t, "user": {"tier": "gold" if i < 3 else "free"}} if t
         else "plain text, not JSON"}
        for i, t in enumerate(TASKS)]
JUDG = [{"record_id": str(i), "judge": "H", "value": 1.0 if TASKS[i] == "billing" else 0.0,
         "passed": TASKS[i] != "billing", "status": "ok"} for i in range(len(TASKS))]


def test_judge_metrics_slice_by_a_metadata_key(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    rate = rows_by(RateMetric("r", RateConfig(judge="H", threshold=0.5,
                                              slice_by=["metadata.task", "metadata.user.tier"]),
                              None).compute(con))
    assert rate[("r", "metadata.task=billing")]["value"] == 1.0
    assert rate[("r", "metadata.task=billing")]["n_attempted"] == 3
    assert rate[("r", "metadata.task=support")]["value"] == 0.0
    assert rate[("r", "metadata.task=null")]["n_attempted"] == 1  # no such key: null
    assert rate[("r", "metadata.user.tier=gold")]["n_attempted"] == 3
    mean = rows_by(MeanMetric("m", JudgeMetricConfig(judge="H", slice_by=["metadata.task"]),
                              None).compute(con))
    assert mean[("m", "metadata.task=support")]["value"] == 0.0


def test_column_metrics_slice_by_a_metadata_key(tmp_path):
    con = connect(tmp_path, RECS, JUDG)
    lat = rows_by(LatencyMetric("lat", LatencyConfig(slice_by=["metadata.task"], n_boot=0),
                                None).compute(con))
    assert lat[("lat.mean", "metadata.task=billing")]["value"] == pytest.approx((0 + 2 + 5) / 3)
    dist = rows_by(DistributionMetric("d", DistributionConfig(
        column="latency_s", slice_by=["metadata.task"], n_boot=0), None).compute(con))
    assert any(k[1] == "metadata.task=support" for k in dist)
    tc = rows_by(TaskCompletionMetric("tc", OutcomeConfig(
        slice_by=["metadata.task"], n_boot=0), None).compute(con))
    assert tc[("tc", "metadata.task=support")]["value"] == 1.0
    assert tc[("tc", "metadata.task=billing")]["value"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", ["nope", "metadata.", "metadata..x"])
def test_a_slice_that_is_neither_a_column_nor_a_metadata_key_is_refused(bad):
    with pytest.raises(ConfigError, match="metadata.<key>"):
        instance("metrics", "r", {"plugin": "rate", "judge": "H", "slice_by": [bad]},
                 "metrics.r")
