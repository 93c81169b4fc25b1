"""context_recall from relevant ids and from a judge."""

from __future__ import annotations

import json

import pytest

from evalkit.metrics.retrieval import ContextRecallConfig, ContextRecallMetric
from tests.metrics.run_tables import by_metric, connect


def run(records, judgments=(), **kw):
    cfg = ContextRecallConfig(**{"n_boot": 0, **kw})
    cfg.validate()
    return by_metric(ContextRecallMetric("cr", cfg, None).compute(
        connect(records, judgments)))["cr"]


def test_recall_from_ids():
    records = [{"record_id": "a", "context": ["x", "y"],
                "metadata": json.dumps({"retrieved": ["d1", "d2"], "relevant_ids":
                                        ["d1", "d3", "d4"]})},
               {"record_id": "b", "context": ["x"],
                "metadata": json.dumps({"retrieved": ["d9"], "relevant_ids": ["d9"]})},
               {"record_id": "c", "context": ["x"],
                "metadata": json.dumps({"retrieved": ["d9"], "relevant_ids": []})}]
    row = run(records, ids="metadata.retrieved")
    assert row["value"] == pytest.approx((1 / 3 + 1) / 2)
    assert row["n_unscored"] == 1  # no relevant passage: recall undefined, not 1
    assert "recall undefined" in next(iter(row["details"]["unscored_reasons"]))


def test_recall_by_position_and_from_a_judge():
    records = [{"record_id": "a", "context": ["x", "y"],
                "metadata": json.dumps({"relevant_ids": [1, 3]})}]
    assert run(records)["value"] == 0.5
    judged = run([{"record_id": "a"}, {"record_id": "b"}, {"record_id": "c"}],
                 [{"record_id": "a", "judge": "rec", "value": 0.25},
                  {"record_id": "b", "judge": "rec", "value": 3.0}], relevant="judge:rec")
    assert judged["value"] == 0.25 and judged["n_unscored"] == 2


def test_config_errors():
    with pytest.raises(ValueError, match="ids"):
        ContextRecallConfig(ids="ranks").validate()
