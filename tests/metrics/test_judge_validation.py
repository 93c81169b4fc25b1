"""judge_validation against scikit-learn, and its undefined cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from evalkit.metrics.judge_validation import JudgeValidationConfig, JudgeValidationMetric
from tests.metrics.run_tables import by_metric, connect, pairs


def run(con, **kw):
    cfg = JudgeValidationConfig(**{"judge_a": "A", "n_boot": 100, **kw})
    cfg.validate()
    return by_metric(JudgeValidationMetric("jv", cfg, None).compute(con))


def test_matches_scikit_learn_on_random_data():
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, 150)
    score = np.clip(truth * 0.4 + rng.random(150) * 0.7, 0, 1)
    rows = run(pairs(score, human=truth), threshold=0.5)
    pred = (score >= 0.5).astype(int)
    assert rows["jv.accuracy"]["value"] == pytest.approx(skm.accuracy_score(truth, pred))
    assert rows["jv.precision"]["value"] == pytest.approx(skm.precision_score(truth, pred))
    assert rows["jv.recall"]["value"] == pytest.approx(skm.recall_score(truth, pred))
    assert rows["jv.f1"]["value"] == pytest.approx(skm.f1_score(truth, pred))
    assert rows["jv.kappa"]["value"] == pytest.approx(skm.cohen_kappa_score(truth, pred))
    tn, fp, fn, tp = skm.confusion_matrix(truth, pred).ravel()
    assert rows["jv.f1"]["details"]["confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
    for r in rows.values():
        assert r["ci_low"] <= r["value"] <= r["ci_high"]


def test_hand_computed_small_case():
    # judge flags records 0, 1; truth flags 1, 2: tp 1, fp 1, fn 1, tn 1
    rows = run(pairs([0.9, 0.8, 0.1, 0.2], human=[0, 1, 1, 0]), n_boot=0)
    assert rows["jv.precision"]["value"] == 0.5
    assert rows["jv.recall"]["value"] == 0.5
    assert rows["jv.accuracy"]["value"] == 0.5
    assert rows["jv.kappa"]["value"] == 0.0


def test_no_flagged_record_makes_precision_undefined_not_zero():
    rows = run(pairs([0.1, 0.2, 0.3], human=[0, 1, 0]))
    assert rows["jv.precision"]["value"] is None
    assert "flagged no record" in rows["jv.precision"]["details"]["undefined"]
    # F1 = 2tp / (2tp + fp + fn) = 0 here, as scikit-learn says, though precision is not
    assert rows["jv.f1"]["value"] == 0.0 == skm.f1_score([0, 1, 0], [0, 0, 0],
                                                         zero_division=np.nan)
    assert rows["jv.recall"]["value"] == 0.0
    assert rows["jv.accuracy"]["value"] == pytest.approx(2 / 3)


def test_unmapped_human_labels_are_unscored():
    con = connect([{"record_id": "1", "human_label": "1"}, {"record_id": "2",
                                                            "human_label": "unsure"},
                   {"record_id": "3"}],
                  [{"record_id": k, "judge": "A", "value": 0.9} for k in "123"])
    row = run(con)["jv.accuracy"]
    assert (row["n_judged"], row["n_unscored"]) == (1, 2)
    # one pair: Wilson's interval of 1 of 1 (a proportion keeps a width), no bootstrap
    assert row["value"] == 1.0 and row["ci_low"] == pytest.approx(0.2065, abs=1e-4)
    assert run(con)["jv.kappa"]["ci_low"] is None


def test_against_a_reference_judge():
    rows = run(pairs([1, 0, 1], [1, 0, 0]), human_label=False, judge_b="B", n_boot=0)
    assert rows["jv.accuracy"]["value"] == pytest.approx(2 / 3)
    assert rows["jv.accuracy"]["details"]["b"] == "B"
