"""context_precision from labels and from a judge."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from evalkit.analysis.ranking import average_precision
from evalkit.metrics.retrieval import ContextPrecisionConfig, ContextPrecisionMetric
from tests.metrics.run_tables import by_metric, connect


def run(records, judgments=(), **kw):
    cfg = ContextPrecisionConfig(**{"n_boot": 0, **kw})
    cfg.validate()
    return by_metric(ContextPrecisionMetric("cp", cfg, None).compute(
        connect(records, judgments)))["cp"]


def rec(rid, labels, n=None):
    return {"record_id": rid, "context": [f"p{i}" for i in range(n or len(labels))],
            "metadata": json.dumps({"relevance": labels})}


def test_average_precision_matches_scikit_learn_on_rankings():
    rng = np.random.default_rng(0)
    for _ in range(20):
        rel = rng.integers(0, 2, 8)
        if not rel.sum():
            continue
        scores = np.arange(8, 0, -1)  # rank order: first passage scores highest
        assert average_precision(rel.astype(float)) == pytest.approx(
            average_precision_score(rel, scores))


def test_rank_aware_and_plain_precision():
    records = [rec("a", [1, 0, 1]), rec("b", [0, 0, 1]), rec("c", [True, False])]
    row = run(records)
    # a: (1 + 2/3)/2; b: (1/3)/1; c: 1
    assert row["value"] == pytest.approx(((1 + 2 / 3) / 2 + 1 / 3 + 1) / 3)
    assert run(records, rank_aware=False)["value"] == pytest.approx((2 / 3 + 1 / 3 + 1 / 2) / 3)
    assert run(records, k=1, rank_aware=False)["value"] == pytest.approx(2 / 3)


def test_unusable_records_are_unscored_with_reasons():
    records = [rec("a", [1, 0]), rec("b", [1], n=2), {"record_id": "c", "context": []},
               {"record_id": "d", "context": ["p"]}, rec("e", ["high"])]
    row = run(records)
    assert row["n_judged"] == 1 and row["n_unscored"] == 4
    assert set(row["details"]["unscored_reasons"]) == {
        "1 relevance labels for 2 passages", "no retrieved passages", "no relevance labels",
        "relevance label 'high' is not a number or boolean"}


def test_graded_labels_with_threshold_and_judge_details():
    row = run([rec("a", [0.9, 0.2])], threshold=0.5)
    assert row["value"] == 1.0
    judged = run([{"record_id": "a", "context": ["x", "y"]}],
                 [{"record_id": "a", "judge": "rel", "details": json.dumps(
                     {"relevance": [0, 1]})}], relevance="judge:rel")
    assert judged["value"] == pytest.approx(0.5)
    failed = run([{"record_id": "a", "context": ["x"]}],
                 [{"record_id": "a", "judge": "rel", "status": "error"}], relevance="judge:rel")
    assert failed["value"] is None and failed["n_unscored"] == 1


def test_config_errors():
    with pytest.raises(ValueError, match="relevance"):
        ContextPrecisionConfig(relevance="labels").validate()
