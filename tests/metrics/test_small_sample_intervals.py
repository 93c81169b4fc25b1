"""Intervals that cover at 20 records (issue 27): kappa and nominal alpha take Wilson's
interval of the agreement share along their line at the observed margins (sklearn,
krippendorff and statsmodels as oracles); the other bootstraps are Hesterberg's expanded
percentile interval (scipy's t and normal as oracles); every bootstrap bound carries its
Monte-Carlo error (``details.mc_error``), checked against the bounds' spread over seeds."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy import stats as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.proportion import proportion_confint

from evalkit.metrics import _pair_statistics as ps
from evalkit.metrics._intervals import canonical, t_quantile
from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics._stats import expanded_alpha, mean_ci
from evalkit.metrics.agreement import AgreementMetric
from evalkit.metrics.judge_validation import JudgeValidationConfig, JudgeValidationMetric
from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from evalkit.metrics.mean import MeanMetric
from tests.metrics.run_tables import by_metric, connect, pairs


def _binary(rng: np.random.Generator, n: int, agree: float) -> tuple[list[int], list[int]]:
    a = (rng.random(n) < 0.4).astype(int)
    b = np.where(rng.random(n) < agree, a, 1 - a)
    return a.tolist(), b.tolist()


@pytest.mark.parametrize("seed,n,agree", [(0, 20, 1.0), (1, 20, 0.85), (2, 70, 0.9)])
def test_kappa_and_nominal_alpha_are_wilson_along_their_line(seed, n, agree):
    a, b = _binary(np.random.default_rng(seed), n, agree)
    x, y = np.array(a, float), np.array(b, float)
    k = int((x == y).sum())
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    pe = x.mean() * y.mean() + (1 - x.mean()) * (1 - y.mean())
    kappa = cohen_kappa_score(a, b)
    assert kappa == pytest.approx((k / n - pe) / (1 - pe), abs=1e-12)  # the line, at p_o
    alpha = krippendorff.alpha(reliability_data=[a, b], level_of_measurement="nominal")
    m, ones = 2 * n, x.sum() + y.sum()
    slope = m * (m - 1) / (m * m - ones ** 2 - (m - ones) ** 2)
    assert alpha == pytest.approx(1 - (1 - k / n) * slope, abs=1e-12)

    rows = by_metric(AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=200),
                                     None).compute(pairs(a, b)))
    jv = by_metric(JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A", n_boot=200),
                                         None).compute(pairs(a, human=b)))
    want_kappa = (max(-1.0, (lo - pe) / (1 - pe)), min(1.0, (hi - pe) / (1 - pe)))
    for row in (rows["ag.kappa"], jv["jv.kappa"]):
        assert row["value"] == pytest.approx(kappa, abs=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(want_kappa, abs=1e-12)
        assert row["details"]["ci_method"] == "wilson (agreement, margins fixed)"
        assert "mc_error" not in row["details"]  # no draw, no Monte-Carlo error
    nominal = rows["ag.alpha_nominal"]
    assert (nominal["ci_low"], nominal["ci_high"]) == pytest.approx(
        (1 - (1 - lo) * slope, 1 - (1 - hi) * slope), abs=1e-12)
    # every pair agreeing: the bootstrap gave [1, 1]; the interval keeps Wilson's width
    assert nominal["ci_low"] <= alpha <= nominal["ci_high"]
    if agree == 1.0:
        assert rows["ag.kappa"]["ci_low"] < 0.9 and rows["ag.kappa"]["ci_high"] == 1.0


def test_t_quantile_and_the_expansion_match_scipy():
    for df in (1, 4, 19, 69, 299, 10_000):
        for p in (0.5, 0.9, 0.975, 0.001):
            assert t_quantile(p, df) == pytest.approx(st.t.ppf(p, df), rel=1e-10, abs=1e-12)
    for n in (2, 20, 70, 300):
        assert expanded_alpha(n, 0.95) == pytest.approx(
            st.norm.cdf(-np.sqrt(n / (n - 1)) * st.t.ppf(0.975, n - 1)), rel=1e-9)


def test_pearson_is_the_expanded_percentile_bootstrap():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(20)
    y = 0.5 * x + rng.standard_normal(20)
    row = by_metric(AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=400,
                                                     seed=3), None).compute(
        pairs(x.tolist(), y.tolist())))["ag.pearson"]
    a, b = canonical([x, y])  # docs/trust.md: the draws are over the pairs sorted by a, b
    idx = np.random.default_rng(3).integers(0, 20, size=(400, 20))
    boot = np.array([st.pearsonr(a[i], b[i]).statistic for i in idx])
    tail = st.norm.cdf(-np.sqrt(20 / 19) * st.t.ppf(0.975, 19))  # 0.0159, not 0.025
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        tuple(np.quantile(boot, [tail, 1 - tail])), abs=1e-9)
    assert row["value"] == pytest.approx(st.pearsonr(x, y).statistic, abs=1e-12)


def test_a_bootstrap_bound_reports_its_monte_carlo_error():
    rng = np.random.default_rng(9)
    x = rng.standard_normal(60)
    y = 0.5 * x + rng.standard_normal(60)
    bounds = np.array([ps.bootstrap([x, y], {"r": ps.pearson}, 500, seed)["r"]
                       for seed in range(40)])
    reported = ps.bootstrap([x, y], {"r": ps.pearson}, 500, 0)["r"].mc_error
    spread = max(bounds[:, 0].std(ddof=1), bounds[:, 1].std(ddof=1))
    assert 0.5 * spread < reported < 2 * spread  # the seed-to-seed spread of the bounds
    lat = rng.lognormal(0, 0.75, 70)
    means = np.array([mean_ci(lat, 500, seed)[:2] for seed in range(40)])
    spread = max(means[:, 0].std(ddof=1), means[:, 1].std(ddof=1))
    assert 0.5 * spread < mean_ci(lat, 500, 0).mc_error < 2 * spread
    # in the metrics table: a bootstrap row says it, a Wilson row has none to say
    records = [{"record_id": f"r{i}", "latency_s": float(v)} for i, v in enumerate(lat)]
    judgments = [{"record_id": f"r{i}", "judge": "A", "value": float(i % 2)}
                 for i in range(70)]
    con = connect(records, judgments)
    mean_row = by_metric(LatencyMetric("lat", LatencyConfig(n_boot=500), None).compute(con))[
        "lat.mean"]
    assert mean_row["details"]["mc_error"] == pytest.approx(mean_ci(lat, 500, 0).mc_error)
    flags = by_metric(MeanMetric("m", JudgeMetricConfig(judge="A", n_boot=500), None)
                      .compute(con))["m"]
    assert flags["details"]["ci_method"] == "wilson" and "mc_error" not in flags["details"]


def test_the_monte_carlo_error_is_shown_where_it_reaches_the_digits_shown():
    from evalkit.numbers import mc_suffix
    from evalkit.report._page import ci_text

    assert mc_suffix(0.5213, 0.8407, {"mc_error": 0.002}) == " ±0.002"
    assert mc_suffix(0.5213, 0.8407, '{"mc_error": 0.002}', 3) == " ±0.002"  # JSON text
    assert mc_suffix(0.5213, 0.8407, {"mc_error": 0.00004}) == ""  # below the 4th digit
    assert mc_suffix(0.5213, 0.8407, {"mc_error": 0.0004}, 3) == ""  # below the 3rd
    assert mc_suffix(0.5213, 0.8407, {"ci_method": "wilson"}) == ""
    assert ci_text(0.5213, 0.8407, {"mc_error": 0.002}) == "[0.5213, 0.8407] ±0.002"
    assert ci_text(None, 0.8407, {"mc_error": 0.002}) == "(open, 0.8407] ±0.002"


@pytest.mark.e2e
def test_mc_error_is_a_number_in_the_table_shown_in_the_summary_off_a_null_row(tmp_path):
    import json

    import pyarrow.parquet as pq

    from tests.conftest import run_cli, run_dirs

    out = run_cli("run", "+experiment=quickstart", cwd=tmp_path).stdout
    [line] = [x for x in out.splitlines() if "latency.mean" in x]
    assert "] ±0.00" in line  # the bootstrap-t bounds' Monte-Carlo error, at 3 digits
    [line] = [x for x in out.splitlines() if "echo_rate " in x]
    assert "±" not in line  # Wilson: nothing drawn
    [run] = run_dirs(tmp_path, "quickstart")
    rows = {(r["metric"], r["slice"]): json.loads(r["details"])
            for r in pq.read_table(run / "metrics.parquet").to_pylist()}
    assert isinstance(rows[("latency.mean", "all")]["mc_error"], float)
    assert "mc_error" not in rows[("echo_mean.raw", "all")]  # no interval, no error


def test_the_distribution_mean_records_its_monte_carlo_error():
    from evalkit.metrics.distribution import DistributionConfig, DistributionMetric

    lat = np.random.default_rng(4).lognormal(0, 0.75, 70)
    con = connect([{"record_id": f"r{i}", "latency_s": float(v)} for i, v in enumerate(lat)])
    rows = by_metric(DistributionMetric("d", DistributionConfig(column="latency_s", n_boot=500),
                                        None).compute(con))
    assert rows["d"]["details"]["mc_error"] == pytest.approx(mean_ci(lat, 500, 0).mc_error)
    assert "mc_error" not in rows["d.p50"]["details"]  # order statistics: nothing drawn
