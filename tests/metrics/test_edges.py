"""Conventions at the edges equal to the references (scipy, scikit-learn), one test per edge:
zero denominators, constant raters, a single record, every record excluded, every judgment an
error. Every null says why, and every row's counts add up:
``n_attempted = n_excluded + n_judged + n_unscored``."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest
from scipy import stats as st
from sklearn import metrics as skm

from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._outcomes import OutcomeConfig
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics.agreement import AgreementMetric
from evalkit.metrics.citation_precision import CitationPrecisionConfig, CitationPrecisionMetric
from evalkit.metrics.cost_per_success import CostPerSuccessConfig, CostPerSuccessMetric
from evalkit.metrics.crosstab import CrosstabConfig, CrosstabMetric
from evalkit.metrics.distribution import DistributionConfig, DistributionMetric
from evalkit.metrics.ece import EceConfig, ExpectedCalibrationError
from evalkit.metrics.judge_validation import JudgeValidationConfig, JudgeValidationMetric
from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from evalkit.metrics.mean import MeanMetric
from evalkit.metrics.rate import RateConfig, RateMetric
from evalkit.metrics.retrieval import ContextRecallConfig, ContextRecallMetric
from evalkit.metrics.span_breakdown import SpanBreakdownConfig, SpanBreakdownMetric
from evalkit.metrics.task_completion import TaskCompletionMetric
from evalkit.metrics.tool_correctness import ToolCorrectnessConfig, ToolCorrectnessMetric
from evalkit.metrics.user_actions import EditRateConfig, EditRateMetric
from tests.metrics.run_tables import by_metric, connect, pairs


def every_metric(con: Any) -> list[dict[str, Any]]:
    """The rows of one instance of each metric kind over judge ``A`` (and ``B``)."""
    out: list[dict[str, Any]] = []
    out += RateMetric("rate", RateConfig(judge="A", n_boot=50), None).compute(con)
    out += MeanMetric("mean", JudgeMetricConfig(judge="A", n_boot=50), None).compute(con)
    out += CrosstabMetric("x", CrosstabConfig(judge="A", by="model", n_boot=50),
                          None).compute(con)
    out += CrosstabMetric("xi", CrosstabConfig(judge="A", by="model", n_boot=50,
                                               include_excluded=False), None).compute(con)
    out += LatencyMetric("lat", LatencyConfig(n_boot=50, include_excluded=True),
                         None).compute(con)
    out += LatencyMetric("lat_in", LatencyConfig(n_boot=50), None).compute(con)
    out += DistributionMetric("d", DistributionConfig(judge="A", n_boot=50,
                                                      included_only=False), None).compute(con)
    out += AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=50,
                                            include_excluded=True), None).compute(con)
    out += JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A", n_boot=50),
                                 None).compute(con)
    out += TaskCompletionMetric("tc", OutcomeConfig(n_boot=50), None).compute(con)
    out += CostPerSuccessMetric("cps", CostPerSuccessConfig(n_boot=50), None).compute(con)
    out += EditRateMetric("edit", EditRateConfig(n_boot=50), None).compute(con)
    out += ToolCorrectnessMetric("tools", ToolCorrectnessConfig(n_boot=50), None).compute(con)
    out += ExpectedCalibrationError("ece", EceConfig(prob="judge:A", correct="human_label",
                                                     n_boot=50), None).compute(con)
    out += CitationPrecisionMetric("cite", CitationPrecisionConfig(support_judge="A",
                                                                   n_boot=50), None).compute(con)
    out += ContextRecallMetric("recall", ContextRecallConfig(relevant="judge:A", n_boot=50),
                               None).compute(con)
    out += SpanBreakdownMetric("spans", SpanBreakdownConfig(), None).compute(con)
    return out


def _run(n: int, excluded: int = 0, status: str = "ok", imported: bool = False):
    rng = np.random.default_rng(n)
    records = [{"record_id": f"r{i:03d}", "model": "ab"[i % 2], "latency_s": 0.1 + i,
                "cost_usd": 0.01, "outcome": "success" if i % 3 else "failure",
                "human_label": str(i % 2), "user_action": ["accepted", "edited"][i % 2],
                "output": f"answer [1] [2] {i}", "context": ["one", "two"],
                "metadata": json.dumps({
                    "tool_calls": [{"name": "sh", "ok": bool(i % 4)}],
                    "spans": [{"type": "llm", "name": "call", "error": i % 5 == 0}]}),
                "excluded_by": "pipeline_failure" if i < excluded else None}
               for i in range(n)]
    judgments = []
    for i in range(n):
        if i < excluded and not imported:
            judgments.append({"record_id": f"r{i:03d}", "judge": "A", "status": "skipped"})
            continue
        for judge in "AB":
            v = float(rng.random())
            judgments.append({"record_id": f"r{i:03d}", "judge": judge, "status": status,
                              **({"value": v, "passed": v < 0.5} if status == "ok" else
                                 {"error": "TimeoutError: slow"})})
    return connect(records, judgments)


@pytest.mark.parametrize("case", ["normal", "imported", "single", "all_excluded",
                                  "all_errors", "empty"])
def test_counts_add_up_and_every_null_says_why(case):
    con = {"normal": lambda: _run(40, excluded=10),
           "imported": lambda: _run(40, excluded=10, imported=True),
           "single": lambda: _run(1),
           "all_excluded": lambda: _run(12, excluded=12),
           "all_errors": lambda: _run(12, status="error"),
           "empty": lambda: _run(0)}[case]()
    rows = every_metric(con)
    assert rows
    for r in rows:
        n = (r["n_attempted"], r.get("n_excluded"), r.get("n_judged"), r.get("n_unscored"))
        assert None not in n, r
        assert n[0] == n[1] + n[2] + n[3], (r["metric"], r["slice"], n)
        if r["value"] is None:
            assert r["details"].get("undefined"), (r["metric"], r["slice"])
            assert r.get("ci_low") is None and r.get("ci_high") is None
        for bound in ("ci_low", "ci_high"):
            assert r.get(bound) is None or np.isfinite(r[bound]), (r["metric"], bound)


def test_a_judge_that_skips_excluded_records_has_no_raw_value_and_an_imported_one_has():
    skipped = {(r["metric"], r["slice"]): r for r in
               RateMetric("rate", RateConfig(judge="A"), None).compute(_run(40, excluded=10))}
    raw, effect = skipped[("rate.raw", "all")], skipped[("rate.filter_effect", "all")]
    assert raw["value"] is None and "scored none of the 10" in raw["details"]["undefined"]
    assert effect["value"] is None and effect["details"]["undefined"]
    imported = {(r["metric"], r["slice"]): r for r in
                RateMetric("rate", RateConfig(judge="A"), None).compute(
                    _run(40, excluded=10, imported=True))}
    raw = imported[("rate.raw", "all")]
    assert raw["value"] is not None and raw["n_judged"] == 40 and raw["n_excluded"] == 0
    assert raw["details"]["n_filtered"] == 10
    assert imported[("rate.filter_effect", "all")]["value"] == pytest.approx(
        raw["value"] - imported[("rate", "all")]["value"])


def test_f1_and_precision_follow_scikit_learn_zero_division():
    # tp 0, fp 0, fn 11: precision 0/0 is undefined (sklearn zero_division=nan), recall 0,
    # F1 = 2tp / (2tp + fp + fn) = 0, as sklearn says
    truth = [1] * 11 + [0] * 9
    rows = by_metric(JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A"), None)
                     .compute(pairs([0.1] * 20, human=truth)))
    pred = [0] * 20
    assert rows["jv.f1"]["value"] == skm.f1_score(truth, pred, zero_division=np.nan) == 0.0
    assert np.isnan(skm.precision_score(truth, pred, zero_division=np.nan))
    assert rows["jv.precision"]["value"] is None
    assert "flagged no record" in rows["jv.precision"]["details"]["undefined"]
    # neither side has a positive: F1 is undefined for sklearn too (zero_division)
    rows = by_metric(JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A"), None)
                     .compute(pairs([0.1] * 5, human=[0] * 5)))
    assert np.isnan(skm.f1_score([0] * 5, [0] * 5, zero_division=np.nan))
    assert rows["jv.f1"]["value"] is None and rows["jv.f1"]["details"]["undefined"]
    assert rows["jv.recall"]["value"] is None


@pytest.mark.parametrize("constant", [0.1, 0.3, 0.7, 1 / 3])
def test_a_constant_rater_has_an_undefined_pearson_r_like_scipy(constant):
    """``x - mean`` of a constant like 0.1 is not exactly 0: the r of that noise printed as
    0 [0, 0]. scipy calls it undefined (NaN, ConstantInputWarning); so does evalkit, and
    says why."""
    b = np.random.default_rng(1).random(30)
    a = [constant] * 30
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(st.pearsonr(a, b).statistic)
    rows = by_metric(AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=100),
                                     None).compute(pairs(a, b)))
    for stat in ("pearson", "spearman", "alpha_interval"):
        if stat == "alpha_interval":
            continue  # alpha is defined: the pooled values vary
        row = rows[f"ag.{stat}"]
        assert row["value"] is None and row["ci_low"] is None, stat
        assert "a is constant" in row["details"]["undefined"]


def test_a_mean_without_an_interval_says_why():
    def mean_row(values):
        records = [{"record_id": f"r{i}"} for i in range(len(values))]
        judgments = [{"record_id": f"r{i}", "judge": "A", "value": v}
                     for i, v in enumerate(values)]
        return by_metric(MeanMetric("m", JudgeMetricConfig(judge="A", raw=False), None)
                         .compute(connect(records, judgments)))["m"]

    one = mean_row([0.4])
    assert one["value"] == 0.4 and one["ci_low"] is None
    assert one["details"]["ci_open"] == "one value: no interval of a mean"
    same = mean_row([0.4] * 5)
    assert same["ci_low"] is None and "no spread" in same["details"]["ci_open"]
    assert mean_row([0.0, 1.0])["details"]["ci_method"] == "wilson"


@pytest.mark.parametrize("values", [[1.0, 3.0], [0.2, 0.5, 0.9], [2.0, 2.0, 7.5]])
def test_a_mean_of_too_few_values_for_the_bootstrap_t_gets_students_interval(values):
    """At n = 2 every resample with a spread has t = 0, so the bootstrap-t collapsed to the
    mean ([2, 2] for 1 and 3). Where too many resamples have no spread, Student's t interval
    (scipy's oracle) is the interval."""
    from evalkit.metrics._stats import mean_ci

    lo, hi, method = mean_ci(np.array(values), n_boot=1000)
    ref = st.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=st.sem(values))
    assert method == "t"
    assert (lo, hi) == pytest.approx(ref, rel=1e-9)


def test_a_latency_of_zero_or_one_second_is_not_a_proportion():
    """Latencies that happen to be 0 s and 1 s got Wilson's interval, capped at 1 s (one
    latency of 1 s: [0.207, 1]). A latency's mean is not a share: Student's t at n = 3
    (scipy), and every equal value says why it has no interval."""
    lat = [1.0, 0.0, 1.0]
    con = connect([{"record_id": f"r{i}", "latency_s": v} for i, v in enumerate(lat)])
    mean = by_metric(LatencyMetric("lat", LatencyConfig(n_boot=200), None).compute(con))
    row = mean["lat.mean"]
    ref = st.t.interval(0.95, 2, loc=np.mean(lat), scale=st.sem(lat))
    assert row["details"]["ci_method"] == "t"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(ref, rel=1e-9)
    con = connect([{"record_id": f"r{i}", "latency_s": 1.0} for i in range(4)])
    row = by_metric(LatencyMetric("lat", LatencyConfig(n_boot=200), None).compute(con))[
        "lat.mean"]
    assert row["ci_low"] is None and "equal" in row["details"]["ci_open"]


def test_the_brier_scores_interval_stays_within_zero_and_one():
    """The bootstrap-t's upper bound of a Brier score of 4 records was 4.25: a mean of
    squared errors in [0, 1] has its interval in [0, 1]."""
    conf, corr = [0.71, 0.72, 0.75, 0.78], [1, 0, 1, 1]
    con = connect([{"record_id": f"r{i}", "confidence": c,
                    "outcome": "success" if k else "failure"}
                   for i, (c, k) in enumerate(zip(conf, corr, strict=True))])
    rows = by_metric(ExpectedCalibrationError("ece", EceConfig(
        correct="outcome", correct_map={"success": 1, "failure": 0}, n_boot=200),
        None).compute(con))
    brier = rows["ece.brier"]
    assert brier["value"] == pytest.approx(skm.brier_score_loss(corr, conf))
    assert 0.0 <= brier["ci_low"] <= brier["value"] <= brier["ci_high"] <= 1.0


_NO_INTERVAL_BY_DESIGN = (".n", ".std", ".filter_effect")  # counts, a spread, a difference


@pytest.mark.parametrize("n", [1, 2])
def test_a_value_without_an_interval_says_why(n):
    """At one record F1, interval alpha, the Brier score and the distribution's mean and
    percentiles had a value, an interval asked for (n_boot > 0) and neither bound, with
    no reason: every such row says why in ``details.ci_open``."""
    rows = every_metric(_run(n))
    silent = [(r["metric"], r["slice"]) for r in rows
              if r["value"] is not None and r.get("ci_low") is None
              and r.get("ci_high") is None and not r["details"].get("ci_open")
              and not r["metric"].endswith(_NO_INTERVAL_BY_DESIGN)
              and not r["metric"].startswith("spans")]
    assert silent == []


def test_a_columns_distribution_of_zeros_and_ones_is_not_a_proportion():
    """As for latency: a record column of 0 and 1 (seconds, dollars) is an amount, and its
    mean gets Student's t (scipy) at n = 3, not Wilson's interval capped at 1."""
    lat = [1.0, 0.0, 1.0]
    con = connect([{"record_id": f"r{i}", "latency_s": v} for i, v in enumerate(lat)])
    row = by_metric(DistributionMetric("d", DistributionConfig(column="latency_s", n_boot=200),
                                       None).compute(con))["d"]
    ref = st.t.interval(0.95, 2, loc=np.mean(lat), scale=st.sem(lat))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("stat", ["pearson", "spearman"])
def test_a_correlation_of_two_or_three_pairs_has_the_whole_range_as_scipy(stat):
    """Two pairs always correlate ±1, and their bootstrap collapsed to [1, 1]. With n ≤ 3
    nothing bounds r: scipy's ``pearsonr(...).confidence_interval()`` is [−1, 1]."""
    for a, b in (([1, 2], [1, 3]), ([1, 2, 3], [1, 3, 2])):
        row = by_metric(AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=200),
                                        None).compute(pairs(a, b)))[f"ag.{stat}"]
        ref = st.pearsonr(a, b).confidence_interval()
        assert (row["ci_low"], row["ci_high"]) == (ref.low, ref.high) == (-1.0, 1.0)
        assert "3" in row["details"]["ci_method"]


def test_a_bootstrap_interval_of_no_width_is_left_open_with_the_reason():
    """A judge right on all 20 records had F1 = 1 [1, 1], and two records that both
    succeeded at the same cost a cost per success of 0.02 [0.02, 0.02]: every resample gave
    the same value, and an interval of no width covers nothing but that value (precision
    and recall there keep Wilson's width). One record had a value, no interval, no
    reason."""
    truth = [1] * 8 + [0] * 12
    rows = by_metric(JudgeValidationMetric("jv", JudgeValidationConfig(judge_a="A", n_boot=200),
                                           None).compute(pairs(truth, human=truth)))
    f1 = rows["jv.f1"]
    assert f1["value"] == 1.0 and f1["ci_low"] is None and f1["ci_high"] is None
    assert "same value" in f1["details"]["ci_open"] and "ci_method" not in f1["details"]
    assert rows["jv.precision"]["ci_low"] < 1.0

    def cost_row(records):
        return by_metric(CostPerSuccessMetric("c", CostPerSuccessConfig(n_boot=200),
                                              None).compute(connect(records)))["c"]

    same = cost_row([{"record_id": r, "cost_usd": 0.02, "outcome": "success"} for r in "ab"])
    assert same["value"] == 0.02 and same["ci_low"] is None
    assert "same value" in same["details"]["ci_open"] and "ci_method" not in same["details"]
    one = cost_row([{"record_id": "a", "cost_usd": 0.02, "outcome": "success"}])
    assert one["value"] == 0.02 and "one record" in one["details"]["ci_open"]
