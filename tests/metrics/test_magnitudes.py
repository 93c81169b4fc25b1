"""Statistics do not depend on the unit the values come in: a score of 1e-200 or 1e200, a
latency or a cost near the top of the float range, give the reference's value (scipy,
krippendorff) and a finite interval, never a null "undefined on these values", an ``inf``
or a ``NaN``. Scaling every value by a power of two is exact in floating point, so the rows
must come out scaled by it to the bit."""

from __future__ import annotations

import warnings
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats as st

from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics._signals import metric_row
from evalkit.metrics.agreement import AgreementMetric
from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from evalkit.metrics.mean import MeanMetric
from tests.metrics.run_tables import by_metric, connect, pairs

_RNG = np.random.default_rng(7)
_X = _RNG.normal(size=12)
_Y = _X + _RNG.normal(size=12)


def _agreement(a: np.ndarray, b: np.ndarray) -> dict[str, dict[str, Any]]:
    return by_metric(AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=200),
                                     None).compute(pairs(a, b)))


@pytest.mark.parametrize("power", [-700, -600, 600, 1000])
def test_a_correlation_and_alpha_do_not_depend_on_the_scale_of_the_scores(power):
    scale = 2.0 ** power
    base, scaled = _agreement(_X, _Y), _agreement(_X * scale, _Y * scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = {"pearson": st.pearsonr(_X * scale, _Y * scale)[0],
               # krippendorff squares the raw values (NaN at these scales): alpha is
               # scale-free, so its reference is the alpha of the unscaled scores
               "alpha_interval": krippendorff.alpha(reliability_data=np.vstack([_X, _Y]),
                                                    level_of_measurement="interval")}
    for stat in ("pearson", "spearman", "alpha_interval"):
        got, want = scaled[f"ag.{stat}"], base[f"ag.{stat}"]
        assert got["value"] is not None, (stat, got["details"].get("undefined"))
        assert (got["value"], got["ci_low"], got["ci_high"]) == (
            want["value"], want["ci_low"], want["ci_high"]), stat
        if stat in ref:
            assert got["value"] == pytest.approx(ref[stat], rel=1e-9), stat
    for side, values in (("mean_a", _X), ("mean_b", _Y)):
        assert scaled["ag.pearson"]["details"][side] == pytest.approx(values.mean() * scale)


def test_a_correlation_of_scores_in_different_units_is_scipys():
    a, b = _X * 2.0 ** 900, _Y * 2.0 ** -900
    got = _agreement(a, b)["ag.pearson"]
    assert got["value"] == pytest.approx(st.pearsonr(a, b)[0], rel=1e-9)


def _mean_rows(values: list[float]) -> dict[str, dict[str, Any]]:
    records = [{"record_id": f"r{i}"} for i in range(len(values))]
    judgments = [{"record_id": f"r{i}", "judge": "A", "value": v}
                 for i, v in enumerate(values)]
    return by_metric(MeanMetric("m", JudgeMetricConfig(judge="A", raw=False, n_boot=300),
                                None).compute(connect(records, judgments)))


@pytest.mark.parametrize("values", [[0.3, 0.9], [0.2, 0.5, 0.9, 0.4],
                                    list(_RNG.lognormal(size=40))])
@pytest.mark.parametrize("power", [-1000, 1000])
def test_a_mean_and_its_interval_scale_with_the_values(values, power):
    scale = 2.0 ** power
    base = _mean_rows(values)["m"]
    got = _mean_rows([v * scale for v in values])["m"]
    assert got["details"]["ci_method"] == base["details"]["ci_method"]
    for key in ("value", "ci_low", "ci_high"):
        assert got[key] is not None and np.isfinite(got[key]), (key, got)
        assert got[key] == pytest.approx(base[key] * scale, rel=1e-12, abs=0), key


def test_a_latency_near_the_top_of_the_float_range_has_a_finite_mean():
    values = [1.0e308, 1.5e308, 1.2e308, 1.7e308]
    con = connect([{"record_id": f"r{i}", "latency_s": v} for i, v in enumerate(values)])
    row = by_metric(LatencyMetric("l", LatencyConfig(n_boot=200), None).compute(con))["l.mean"]
    assert row["value"] == pytest.approx(np.mean(np.array(values) / 4) * 4, rel=1e-15)
    lo, hi = row["ci_low"], row["ci_high"]
    assert lo is not None and np.isfinite(lo) and lo <= row["value"]
    # the upper bound lies beyond the largest float: open, and the row says why
    assert hi is None or np.isfinite(hi)
    if hi is None:
        assert "float" in row["details"]["ci_open"]


@pytest.mark.parametrize("value, ci", [(float("inf"), (0.0, 1.0)),
                                       (float("-inf"), (None, None)),
                                       (0.5, (0.1, float("inf"))),
                                       (0.5, (float("nan"), 0.9))])
def test_a_metric_row_never_holds_an_infinite_or_nan_number(value, ci):
    row = metric_row("m", "all", value, ci, 1, 0, 1, 0, details={})
    for key in ("value", "ci_low", "ci_high"):
        assert row[key] is None or np.isfinite(row[key]), key
    if row["value"] is None:
        assert "finite" in row["details"]["undefined"]
    elif None in (row["ci_low"], row["ci_high"]):
        assert "finite" in row["details"]["ci_open"]


def _distribution(values: list[float]) -> dict[str, dict[str, Any]]:
    from evalkit.metrics.distribution import DistributionConfig, DistributionMetric

    records = [{"record_id": f"r{i}"} for i in range(len(values))]
    judgments = [{"record_id": f"r{i}", "judge": "A", "value": v}
                 for i, v in enumerate(values)]
    return by_metric(DistributionMetric("d", DistributionConfig(judge="A", n_boot=200),
                                        None).compute(connect(records, judgments)))


@pytest.mark.parametrize("values, power", [([-1.5e308, 1.6e308, 1.0e308, 0.0], 1023),
                                           ([1e-310, 3e-310, 2e-310, 2.5e-310], -1040),
                                           ([1.3e308] * 3, 1023)])
def test_a_distribution_of_values_at_the_ends_of_the_float_range_is_finite(values, power):
    """Its histogram spanned more than the largest float (numpy raised "Too many bins"), its
    standard deviation of subnormal scores was 0."""
    rows = _distribution(values)
    near_one = np.ldexp(np.array(values), -power)
    stats = rows["d"]["details"]
    assert sum(b["count"] for b in stats["histogram"]) == len(values)
    assert all(np.isfinite(b[k]) for b in stats["histogram"] for k in ("low", "high"))
    assert stats["mean"] == pytest.approx(np.ldexp(near_one.mean(), power), rel=1e-12)
    assert stats["std"] == pytest.approx(np.ldexp(near_one.std(ddof=1), power), rel=1e-12)
    if len(set(values)) > 1:
        assert rows["d.std"]["value"] > 0
    for row in rows.values():
        for key in ("value", "ci_low", "ci_high"):
            assert row[key] is None or np.isfinite(row[key]), (row["metric"], key)
