"""agreement: hand-computed cases, edge cases, and scipy / scikit-learn / krippendorff as
references on random data."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from evalkit.metrics._pair_statistics import (
    alpha_interval,
    alpha_nominal,
    codes,
    ranks_from_codes,
    spearman_codes,
)
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics.agreement import AgreementMetric
from tests.metrics.run_tables import by_metric, connect, pairs


def run(con, n_boot: int = 200, **kw):
    cfg = PairConfig(**{"judge_a": "A", "judge_b": "B", "n_boot": n_boot, **kw})
    cfg.validate()
    return AgreementMetric("agree", cfg, None).compute(con)


def test_hand_computed_binary():
    # a = 1 0 1 1, b = 1 0 0 1: p_o = 3/4, p_e = .75·.5 + .25·.5 = .5, kappa = .5
    rows = by_metric(run(pairs([1, 0, 1, 1], [1, 0, 0, 1]), n_boot=0))
    assert rows["agree.kappa"]["value"] == pytest.approx(0.5)
    assert rows["agree.percent_agreement"]["value"] == pytest.approx(0.75)
    assert rows["agree.n"]["value"] == 4
    # nominal alpha, two coders: 1 - (n-1)·Σo·δ / Σ n_c n_k δ = 1 - 7·2 / (64 - 25 - 9)
    assert rows["agree.alpha_nominal"]["value"] == pytest.approx(1 - 7 * 2 / 30)
    assert rows["agree.pearson"]["value"] == pytest.approx(stats.pearsonr(
        [1, 0, 1, 1], [1, 0, 0, 1])[0])
    for r in rows.values():
        assert r["n_judged"] == 4 and r["n_attempted"] == 4 and r["n_unscored"] == 0


def test_against_references_on_random_data():
    rng = np.random.default_rng(7)
    a = np.round(rng.random(120), 1)  # rounded: ties, which Spearman must average
    b = np.clip(a + rng.normal(0, 0.3, 120), 0, 1).round(2)
    rows = by_metric(run(pairs(a, b), n_boot=0, threshold=0.5))
    assert rows["agree.pearson"]["value"] == pytest.approx(stats.pearsonr(a, b)[0])
    assert rows["agree.spearman"]["value"] == pytest.approx(stats.spearmanr(a, b)[0])
    xa, xb = (a > 0.5).astype(int), (b > 0.5).astype(int)  # flag_at ">"
    assert rows["agree.kappa"]["value"] == pytest.approx(cohen_kappa_score(xa, xb))
    assert rows["agree.alpha_interval"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=[a, b], level_of_measurement="interval"))
    assert rows["agree.alpha_nominal"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=[xa, xb], level_of_measurement="nominal"))
    assert rows["agree.percent_agreement"]["value"] == pytest.approx(np.mean(xa == xb))


def test_vectorised_statistics_match_references_row_by_row():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, size=(6, 40)).astype(float)
    b = rng.integers(0, 5, size=(6, 40)).astype(float)
    for i in range(6):
        assert alpha_interval(a, b)[i] == pytest.approx(krippendorff.alpha(
            reliability_data=[a[i], b[i]], level_of_measurement="interval"))
        x, y = (a[i] >= 2).astype(float), (b[i] >= 2).astype(float)
        assert alpha_nominal(x[None], y[None])[0] == pytest.approx(krippendorff.alpha(
            reliability_data=[x, y], level_of_measurement="nominal"))
        assert np.allclose(ranks_from_codes(*codes(a[i:i + 1]))[0], stats.rankdata(a[i]))
        (ca, ka), (cb, kb) = codes(a), codes(b)
        assert spearman_codes(ca, cb, ka, kb)[i] == pytest.approx(
            stats.spearmanr(a[i], b[i])[0])


def test_confidence_interval_brackets_the_value_and_is_reproducible():
    rng = np.random.default_rng(1)
    a = rng.random(80)
    b = a + rng.normal(0, 0.2, 80)
    first = by_metric(run(pairs(a, b)))
    again = by_metric(run(pairs(a, b)))
    for name, row in first.items():
        if name == "agree.n":
            continue
        assert row["ci_low"] <= row["value"] <= row["ci_high"], name
        assert (row["ci_low"], row["ci_high"]) == (again[name]["ci_low"],
                                                   again[name]["ci_high"])


def test_constant_inputs_are_undefined_with_a_reason_not_nan():
    rows = by_metric(run(pairs([1, 1, 1, 1], [0, 1, 0, 1])))
    for stat in ("pearson", "spearman"):
        row = rows[f"agree.{stat}"]
        assert row["value"] is None and row["ci_low"] is None
        assert "a is constant" in row["details"]["undefined"]
    # one constant rater: kappa is 0 (as scikit-learn), percent agreement still defined
    assert rows["agree.kappa"]["value"] == pytest.approx(cohen_kappa_score([1] * 4, [0, 1] * 2))
    assert rows["agree.percent_agreement"]["value"] == pytest.approx(0.5)
    both = by_metric(run(pairs([1, 1, 1], [1, 1, 1])))
    assert both["agree.kappa"]["value"] is None
    assert "both raters" in both["agree.kappa"]["details"]["undefined"]
    assert both["agree.alpha_interval"]["value"] is None
    for row in both.values():
        assert row["value"] is None or not math.isnan(row["value"])


def test_missing_and_errored_scores_are_unscored_and_counted():
    con = connect(
        [{"record_id": f"r{i}"} for i in range(5)] + [{"record_id": "x", "excluded_by": "f"}],
        [{"record_id": "r0", "judge": "A", "value": 0.1}, {"record_id": "r0", "judge": "B",
                                                           "value": 0.2},
         {"record_id": "r1", "judge": "A", "value": 0.9}, {"record_id": "r1", "judge": "B",
                                                           "value": 0.8},
         {"record_id": "r2", "judge": "A", "value": 0.5}, {"record_id": "r2", "judge": "B",
                                                           "status": "error"},
         {"record_id": "r3", "judge": "A", "value": float("nan")},
         {"record_id": "r3", "judge": "B", "value": 0.3},
         {"record_id": "x", "judge": "A", "value": 1.0}, {"record_id": "x", "judge": "B",
                                                          "value": 1.0}])
    row = by_metric(run(con))["agree.pearson"]
    assert (row["n_attempted"], row["n_excluded"], row["n_judged"], row["n_unscored"]) == \
        (6, 1, 2, 3)
    assert row["details"]["unusable"]["b"] == {"judgment status error": 1,
                                               "no judgment from 'B'": 1}
    assert "not finite" in next(iter(row["details"]["unusable"]["a"]))
    audit = by_metric(run(con, include_excluded=True))["agree.pearson"]
    assert audit["n_judged"] == 3


def test_empty_run_single_record_and_unknown_judge():
    empty = by_metric(run(connect([])))
    assert all(r["value"] is None or r["metric"] == "agree.n" for r in empty.values())
    assert empty["agree.n"]["value"] == 0
    single = by_metric(run(pairs([0.3], [0.4])))
    assert single["agree.pearson"]["value"] is None
    assert "at least 2 pairs" in single["agree.pearson"]["details"]["undefined"]
    assert single["agree.percent_agreement"]["value"] == 1.0
    # one pair of one agreeing: Wilson's interval of 1 of 1, not a point
    assert single["agree.percent_agreement"]["ci_low"] == pytest.approx(0.2065, abs=1e-4)
    assert single["agree.kappa"]["ci_low"] is None
    ghost = by_metric(run(pairs([0.3, 0.5]), judge_b="nobody"))
    assert "no judgments from 'nobody'" in ghost["agree.kappa"]["details"]["undefined"]


def test_human_labels_with_a_map_and_flip():
    con = connect(
        [{"record_id": str(i), "human_label": h} for i, h in enumerate(["yes", "no", "yes",
                                                                        "maybe"])],
        [{"record_id": str(i), "judge": "A", "label": lab, "value": 0.0}
         for i, lab in enumerate(["supported", "unsupported", "supported", "supported"])])
    cfg = dict(judge_b=None, human_label=True, field_a="label",
               map_a={"supported": 1.0, "unsupported": 0.0}, map_b={"yes": 0.0, "no": 1.0},
               flip_b=True, n_boot=0)
    row = by_metric(run(con, **cfg))["agree.percent_agreement"]
    assert row["value"] == 1.0 and row["n_judged"] == 3 and row["n_unscored"] == 1
    assert "maybe" in next(iter(row["details"]["unusable"]["b"]))


def test_slices_by_a_record_column():
    rows = run(pairs([0, 1, 0, 1, 1, 0], [0, 1, 1, 1, 1, 0], model=list("aaabbb")),
               slice_by=["model"], n_boot=0)
    got = {r["slice"] for r in rows}
    assert got == {"all", "model=a", "model=b"}
    assert by_metric(rows, "model=b")["agree.percent_agreement"]["value"] == 1.0


@pytest.mark.parametrize("kw,msg", [
    ({"human_label": True}, "exactly one"),
    ({"judge_b": None}, "exactly one"),
    ({"field_a": "score"}, "field_a"),
    ({"slice_by": ["nope"]}, "slice_by"),
])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        PairConfig(**{"judge_a": "A", "judge_b": "B", **kw}).validate()
