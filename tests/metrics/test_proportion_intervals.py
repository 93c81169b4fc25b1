"""Proportions get Wilson's interval (it keeps a width at 0 and at 1, where the bootstrap's
collapsed: a filtered rate of 0/3 printed CI [0, 0]); a kappa of 0 is exactly 0."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from evalkit.metrics._pair_statistics import cohen_kappa
from evalkit.metrics._stats import mean_ci, wilson_ci
from evalkit.metrics.rate import RateConfig, RateMetric
from tests.metrics.run_tables import by_metric, connect


@pytest.mark.parametrize(("k", "n"), [(0, 3), (3, 3), (1, 10), (7, 10), (0, 1), (50, 160),
                                      (999, 1000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k: int, n: int, confidence: float) -> None:
    ref = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert wilson_ci(k, n, confidence) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_zero_and_one_in_few_records_keep_a_width() -> None:
    lo, hi, method = mean_ci(np.zeros(3))
    assert (lo, method) == (0.0, "wilson") and hi == pytest.approx(0.5615, abs=1e-4)
    lo, hi, _ = mean_ci(np.ones(3))
    assert hi == 1.0 and lo == pytest.approx(0.4385, abs=1e-4)
    # values that are not 0/1 keep the bootstrap
    assert mean_ci(np.array([0.2, 0.4, 0.9, 0.7]))[2] == "bootstrap-t"


def test_a_filtered_rate_of_none_flagged_has_an_honest_interval() -> None:
    records = [{"record_id": f"r{i}", "model": "m"} for i in range(3)]
    judgments = [{"record_id": f"r{i}", "judge": "j", "value": 0.1, "passed": True,
                  "status": "ok"} for i in range(3)]
    cfg = RateConfig(judge="j", raw=False)
    (row,) = [r for r in by_metric(RateMetric("flag", cfg, None).compute(
        connect(records, judgments))).values()]
    assert row["value"] == 0.0
    assert row["ci_low"] == 0.0 and row["ci_high"] == pytest.approx(0.5615, abs=1e-4)
    assert row["details"]["ci_method"] == "wilson"


def test_kappa_of_independent_ratings_is_exactly_zero() -> None:
    # observed agreement equals chance: from proportions this gave -2.59e-16
    x = np.array([[1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1.0]])
    y = np.array([[0, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1.0]])
    assert cohen_kappa(x, y)[0] == 0.0
    # one rater constant: chance agreement is all there is (3.08e-17 before)
    assert cohen_kappa(np.array([[0.0] + [1.0] * 9]), np.zeros((1, 10)))[0] == 0.0
    rng = np.random.default_rng(0)
    a = (rng.random((200, 37)) < 0.3).astype(float)
    b = (rng.random((200, 37)) < 0.6).astype(float)
    from sklearn.metrics import cohen_kappa_score
    for i in range(0, 200, 20):
        assert cohen_kappa(a[i:i + 1], b[i:i + 1])[0] == pytest.approx(
            cohen_kappa_score(a[i], b[i]), abs=1e-12)


def test_the_summary_prints_rounding_noise_as_zero() -> None:
    from evalkit.runner.summary import _num

    assert _num(8.86e-17) == "0" and _num(-3e-15) == "0" and _num(0.1234) == "0.123"
