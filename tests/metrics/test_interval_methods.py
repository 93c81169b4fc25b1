"""Interval methods chosen for coverage (issue 27), each against its reference: Wilson's
interval for every proportion whatever metric produces it (statsmodels), the distribution-free
order-statistic interval for percentiles at every n (scipy's ``quantile_test`` and the
binomial), and bootstraps that are a function of the data, not of the records' order."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.proportion import proportion_confint

from evalkit.metrics._intervals import clustered_proportion_ci, quantile_interval
from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics.agreement import AgreementMetric
from evalkit.metrics.crosstab import CrosstabConfig, CrosstabMetric
from evalkit.metrics.disagreements import DisagreementsConfig, DisagreementsMetric
from evalkit.metrics.judge_validation import JudgeValidationConfig, JudgeValidationMetric
from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from evalkit.metrics.mean import MeanMetric
from evalkit.metrics.rate import RateConfig, RateMetric
from tests.metrics.run_tables import by_metric, connect, pairs


def wilson(k: int, n: int) -> tuple[float, float]:
    return tuple(proportion_confint(k, n, alpha=0.05, method="wilson"))  # type: ignore


def test_precision_at_one_and_recall_at_zero_keep_a_wilson_width():
    # the cases: precision 58/58 showed [1, 1], recall 0/11 showed [0, 0]
    judge = [0.9] * 58 + [0.1] * 11 + [0.1] * 31
    truth = [1] * 58 + [1] * 11 + [0] * 31
    cfg = JudgeValidationConfig(judge_a="A", n_boot=200)
    rows = by_metric(JudgeValidationMetric("jv", cfg, None).compute(pairs(judge, human=truth)))
    assert (rows["jv.precision"]["ci_low"], rows["jv.precision"]["ci_high"]) == \
        pytest.approx(wilson(58, 58), abs=1e-12)
    assert rows["jv.precision"]["ci_low"] == pytest.approx(0.938, abs=5e-4)
    assert (rows["jv.recall"]["ci_low"], rows["jv.recall"]["ci_high"]) == \
        pytest.approx(wilson(58, 69), abs=1e-12)
    assert (rows["jv.accuracy"]["ci_low"], rows["jv.accuracy"]["ci_high"]) == \
        pytest.approx(wilson(89, 100), abs=1e-12)
    assert rows["jv.accuracy"]["details"]["ci_method"] == "wilson"
    only_misses = [0.1] * 11 + [0.9] * 5
    rows = by_metric(JudgeValidationMetric("jv", cfg, None).compute(
        pairs(only_misses, human=[1] * 11 + [0] * 5)))
    assert rows["jv.recall"]["value"] == 0.0
    assert (rows["jv.recall"]["ci_low"], rows["jv.recall"]["ci_high"]) == \
        pytest.approx(wilson(0, 11), abs=1e-12)
    assert rows["jv.recall"]["ci_high"] == pytest.approx(0.259, abs=5e-4)


def test_every_proportion_metric_gets_wilson():
    a = [0.9] * 40 + [0.1] * 10
    b = [0.8] * 40 + [0.2] * 9 + [0.9]
    cfg = PairConfig(judge_a="A", judge_b="B", n_boot=200)
    agree = by_metric(AgreementMetric("ag", cfg, None).compute(pairs(a, b)))
    assert (agree["ag.percent_agreement"]["ci_low"],
            agree["ag.percent_agreement"]["ci_high"]) == pytest.approx(wilson(49, 50), abs=1e-12)
    records = [{"record_id": f"r{i:03d}", "model": "m"} for i in range(30)]
    judgments = [{"record_id": f"r{i:03d}", "judge": "j", "value": 0.9,
                  "passed": False} for i in range(30)]
    con = connect(records, judgments)
    rate = by_metric(RateMetric("r", RateConfig(judge="j", raw=False, n_boot=200), None)
                     .compute(con))["r"]
    assert (rate["ci_low"], rate["ci_high"]) == pytest.approx(wilson(30, 30), abs=1e-12)
    cross = by_metric(CrosstabMetric("x", CrosstabConfig(judge="j", by="model", n_boot=200),
                                     None).compute(con))["x.flagged"]
    assert (cross["ci_low"], cross["ci_high"]) == pytest.approx(wilson(30, 30), abs=1e-12)
    assert cross["details"]["ci_method"] == "wilson"


def test_disagreement_share_gets_wilson(tmp_path):
    a = [0.9] * 20 + [0.1] * 10
    b = [0.9] * 20 + [0.1] * 10
    ctx = type("Ctx", (), {"run_dir": tmp_path})()
    cfg = DisagreementsConfig(judge_a="A", judge_b="B", n_boot=200)
    row = by_metric(DisagreementsMetric("d", cfg, ctx).compute(pairs(a, b)))["d"]
    assert row["value"] == 0.0
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson(0, 30), abs=1e-12)


def test_clustered_proportion_is_wilson_at_the_effective_size():
    num = np.array([2.0, 1, 3, 0, 2, 1])
    den = np.array([2.0, 2, 3, 1, 2, 2])
    p = num.sum() / den.sum()
    m = len(den)
    resid = num - p * den
    var = (resid ** 2).sum() / (m * (m - 1)) / den.mean() ** 2
    n_eff = min(den.sum(), p * (1 - p) / var)
    assert clustered_proportion_ci(num, den) == pytest.approx(
        proportion_confint(p * n_eff, n_eff, alpha=0.05, method="wilson"), abs=1e-12)
    # every citation supported: a width, where the bootstrap over records gave [1, 1]
    lo, hi = clustered_proportion_ci(den, den)
    assert hi == 1.0 and lo == pytest.approx(wilson(12, 12)[0], abs=1e-12)


@pytest.mark.parametrize("n", [5, 20, 70, 300, 1000, 6000])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_quantile_interval_is_hutsons_fractional_order_statistic(n, q):
    """Each bound lies between scipy's exact (conservative) order statistic and the next one
    toward the centre, at Hutson's fractional rank u where the beta tail reaches α/2
    (scipy's ``betainc`` and ``brentq`` as oracles); an open bound is where scipy has none
    (NaN), and the other bound then takes the whole α."""
    from scipy.optimize import brentq
    from scipy.special import betainc

    x = np.sort(np.random.default_rng(n).lognormal(0, 1, n))
    lo, hi, why = quantile_interval(x, q, 0.95)
    exact = st.quantile_test(x, q=np.median(x), p=q).confidence_interval(0.95)
    if np.isnan(exact.low) and np.isnan(exact.high):
        assert lo is None and hi is None and "too few" in why
        return
    if np.isnan(exact.low):
        assert lo is None and "lower bound open" in why
    if np.isnan(exact.high):
        assert hi is None and "upper bound open" in why
    level = 0.025 if lo is not None and hi is not None else 0.05

    def at(u):
        k = int(np.floor(u))
        return x[k - 1] if k >= n else x[k - 1] + (u - k) * (x[k] - x[k - 1])

    if lo is not None:
        one_sided = st.quantile_test(x, q=np.median(x), p=q, alternative="greater")
        k = int(np.flatnonzero(x == (exact.low if level == 0.025 else
                                     one_sided.confidence_interval(0.95).low))[0])
        assert x[k] <= lo <= x[min(k + 1, n - 1)]
        if k + 1 < n and n <= 5000:  # above, linear between whole ranks: the bracket holds
            u = brentq(lambda u: 1 - betainc(u, n + 1 - u, q) - level, k + 1, k + 2)
            assert lo == pytest.approx(at(u), rel=1e-9)
    if hi is not None:
        one_sided = st.quantile_test(x, q=np.median(x), p=q, alternative="less")
        k = int(np.flatnonzero(x == (exact.high if level == 0.025 else
                                     one_sided.confidence_interval(0.95).high))[0])
        assert x[max(k - 1, 0)] <= hi <= x[k]
        if k > 0 and n <= 5000:
            u = brentq(lambda u: betainc(u, n + 1 - u, q) - level, k, k + 1)
            assert hi == pytest.approx(at(u), rel=1e-9)


def test_the_incomplete_beta_matches_scipy():
    from scipy.special import betainc

    from evalkit.metrics._intervals import _betainc

    rng = np.random.default_rng(0)
    for _ in range(500):
        a, b, x = rng.uniform(0.5, 3000), rng.uniform(0.5, 3000), rng.random()
        assert _betainc(a, b, x) == pytest.approx(betainc(a, b, x), abs=1e-11)


def test_latency_percentiles_have_an_interval_at_every_n_and_say_when_a_bound_is_open():
    x = np.random.default_rng(2).lognormal(0, 1, 20)
    records = [{"record_id": f"r{i}", "latency_s": v} for i, v in enumerate(x)]
    rows = by_metric(LatencyMetric("lat", LatencyConfig(), None).compute(connect(records)))
    p50, p99 = rows["lat.p50"], rows["lat.p99"]
    assert p50["ci_low"] < p50["value"] < p50["ci_high"]
    assert p50["details"]["ci_method"] == "order statistics"
    # 20 values cannot bound the 99th percentile from above: the largest of 20 lies below
    # it with probability 0.99^20 = 0.82
    assert p99["ci_high"] is None and "upper bound open" in p99["details"]["ci_open"]
    assert p99["ci_low"] is not None and p99["ci_low"] <= p99["value"]
    # a bootstrap upper bound could never exceed the sample maximum; the p95 interval's
    # bound is not capped by a resampling of the values
    one = by_metric(LatencyMetric("lat", LatencyConfig(), None).compute(
        connect(records[:1])))
    assert one["lat.p50"]["ci_low"] is None and one["lat.p50"]["ci_high"] is None
    assert "too few" in one["lat.p50"]["details"]["ci_open"]


def _shuffled_and_renamed(records, judgments, seed):
    """The same data in another order under other record ids (a merge of shards, a
    shuffled input): what an interval must not depend on."""
    order = np.random.default_rng(seed).permutation(len(records))
    rename = {records[i]["record_id"]: f"s{seed}-{k:04d}" for k, i in enumerate(order)}
    recs = [{**records[i], "record_id": rename[records[i]["record_id"]]} for i in order]
    juds = [{**j, "record_id": rename[j["record_id"]]} for j in reversed(judgments)]
    return recs, juds


def test_intervals_are_a_function_of_the_data_not_of_its_order():
    rng = np.random.default_rng(7)
    n = 120
    records = [{"record_id": f"r{i:04d}", "latency_s": float(rng.lognormal()),
                "human_label": str(int(rng.random() < 0.4)), "model": "ab"[i % 2]}
               for i in range(n)]
    judgments = [{"record_id": f"r{i:04d}", "judge": "A", "value": float(rng.random())}
                 for i in range(n)] + \
                [{"record_id": f"r{i:04d}", "judge": "B", "value": float(rng.random())}
                 for i in range(n)]

    def everything(recs, juds):
        con = connect(recs, juds)
        out = []
        out += LatencyMetric("lat", LatencyConfig(n_boot=300, slice_by=["model"]),
                             None).compute(con)
        out += MeanMetric("m", JudgeMetricConfig(judge="A", n_boot=300), None).compute(con)
        out += AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=300),
                               None).compute(con)
        out += JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A", n_boot=300),
                                     None).compute(con)
        return {(r["metric"], r["slice"]): (r["value"], r["ci_low"], r["ci_high"])
                for r in out}

    clean = everything(records, judgments)
    for seed in (1, 2):
        assert everything(*_shuffled_and_renamed(records, judgments, seed)) == clean


@pytest.mark.parametrize("n", [57, 300])
def test_a_bootstrap_interval_recomputed_from_the_documented_algorithm(n):
    """docs/trust.md#recomputing-an-interval, from the values alone: sort them; with at most
    256 distinct values draw ``multinomial(n, counts / n, size=n_boot)`` over the ascending
    levels, else ``integers(0, n, size=(n_boot, n))`` indices into the sorted values, one
    row per resample, from ``default_rng(seed)``; studentize each resample's mean
    (t = (m* − m) / (s* / √n)) and take m − t(1 − α/2)·s/√n and m − t(α/2)·s/√n, with numpy's
    linear quantiles of t."""
    x = np.random.default_rng(3).lognormal(0, 1, n)
    records = [{"record_id": f"r{i}", "latency_s": v} for i, v in enumerate(x)]
    row = by_metric(LatencyMetric("lat", LatencyConfig(n_boot=500, seed=11), None).compute(
        connect(records)))["lat.mean"]
    values = np.sort(x)
    rng = np.random.default_rng(11)
    levels, counts = np.unique(values, return_counts=True)
    if len(levels) <= 256:
        drawn = rng.multinomial(n, counts / n, size=500)
        means = drawn @ levels / n
        sds = np.sqrt((drawn @ levels ** 2 - n * means ** 2) / (n - 1))
    else:
        resamples = values[rng.integers(0, n, size=(500, n))]
        means, sds = resamples.mean(axis=1), resamples.std(axis=1, ddof=1)
    m, se = values.mean(), values.std(ddof=1) / np.sqrt(n)
    t_lo, t_hi = np.quantile((means - m) / (sds / np.sqrt(n)), [0.025, 0.975])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((m - t_hi * se, m - t_lo * se),
                                                            rel=1e-9)
    assert row["details"]["ci_method"] == "bootstrap-t"
