"""latency: numpy's percentiles, unusable values, excluded records, slices."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.metrics.latency import LatencyConfig, LatencyMetric
from tests.metrics.run_tables import by_metric, connect


def run(records, **kw):
    cfg = LatencyConfig(**{"n_boot": 100, **kw})
    cfg.validate()
    return LatencyMetric("lat", cfg, None).compute(connect(records))


def test_percentiles_and_mean_match_numpy():
    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 1, 300)
    rows = by_metric(run([{"record_id": str(i), "latency_s": v} for i, v in enumerate(x)]))
    for q in (50, 95, 99):
        row = rows[f"lat.p{q}"]
        assert row["value"] == pytest.approx(np.percentile(x, q))
        # 300 values bound the p99 only from below (0.99^300 = 0.049 > 0.025)
        assert row["ci_low"] <= row["value"] <= (row["ci_high"] or np.inf)
    assert rows["lat.p99"]["ci_high"] is None and rows["lat.p50"]["ci_high"] is not None
    assert rows["lat.mean"]["value"] == pytest.approx(x.mean())


def test_missing_nan_and_negative_are_unscored_and_excluded_left_out():
    records = [{"record_id": "a", "latency_s": 1.0}, {"record_id": "b", "latency_s": 3.0},
               {"record_id": "c", "latency_s": None},
               {"record_id": "d", "latency_s": float("nan")},
               {"record_id": "e", "latency_s": -2.0},
               {"record_id": "f", "latency_s": 100.0, "excluded_by": "pipeline_failure"}]
    row = by_metric(run(records))["lat.p50"]
    assert row["value"] == 2.0
    assert (row["n_attempted"], row["n_excluded"], row["n_judged"], row["n_unscored"]) == \
        (6, 1, 2, 3)
    assert row["details"]["n_negative_ignored"] == 1
    with_failed = by_metric(run(records, include_excluded=True))["lat.p50"]
    assert with_failed["value"] == 3.0


def test_single_record_empty_and_all_excluded():
    one = by_metric(run([{"record_id": "a", "latency_s": 0.5}]))
    # one value: the p50 has no interval; the p99 lies above it with probability 0.99, a
    # one-sided 95% interval [0.5, open)
    assert one["lat.p50"]["ci_low"] is None and one["lat.p50"]["ci_high"] is None
    assert one["lat.p99"]["value"] == 0.5 and one["lat.p99"]["ci_low"] == 0.5
    assert one["lat.p99"]["ci_high"] is None and one["lat.mean"]["ci_low"] is None
    assert all(r["value"] is None for r in run([]))
    excluded = run([{"record_id": "a", "latency_s": 0.5, "excluded_by": "x"}])
    assert all(r["value"] is None and "undefined" in r["details"] for r in excluded)


def test_custom_percentiles_column_and_slices():
    records = [{"record_id": str(i), "output_tokens": i, "model": "ab"[i % 2]}
               for i in range(10)]
    rows = run(records, column="output_tokens", percentiles=[90, 99.9], slice_by=["model"])
    names = {r["metric"] for r in rows}
    assert names == {"lat.p90", "lat.p99_9", "lat.mean"}
    assert by_metric(rows, "model=a")["lat.mean"]["value"] == 4.0


@pytest.mark.parametrize("kw,msg", [({"column": "output"}, "numeric"),
                                    ({"percentiles": [101]}, "percentiles")])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        LatencyConfig(**kw).validate()


def test_large_slices_get_intervals_close_to_the_bootstrap():
    from evalkit.metrics._pair_statistics import bootstrap

    x = np.random.default_rng(9).lognormal(0, 1, 25_000)
    rows = by_metric(run([{"record_id": str(i), "latency_s": v} for i, v in enumerate(x)],
                         n_boot=200))
    boot = bootstrap([x], {"p95": lambda v: np.percentile(v, 95, axis=1),
                           "mean": lambda v: v.mean(axis=1)}, 200, 0, 0.95)
    for stat in ("p95", "mean"):
        row = rows[f"lat.{stat}"]
        assert row["details"]["ci_method"] == ("order statistics" if stat == "p95"
                                               else "normal")
        width = boot[stat][1] - boot[stat][0]
        assert row["ci_low"] == pytest.approx(boot[stat][0], abs=width / 4)
        assert row["ci_high"] == pytest.approx(boot[stat][1], abs=width / 4)


def test_mean_ci_levels_are_counted_only_when_few():
    """Few levels (flags, scores) get the multinomial bootstrap, whatever comes first in the
    array; many distinct values skip counting levels and take the resampling or the normal
    interval; the interval is the one the definition gives either way."""
    from statistics import NormalDist

    from evalkit.metrics._stats import mean_ci

    rng = np.random.default_rng(5)
    flags = np.concatenate([np.arange(200.0), rng.integers(0, 2, 30_000).astype(float)])
    lo, hi, method = mean_ci(flags)
    assert method == "bootstrap-t" and lo < flags.mean() < hi
    n = len(flags)
    levels, counts = np.unique(flags, return_counts=True)
    drawn = np.random.default_rng(0).multinomial(n, counts / n, size=1000)
    means = drawn @ levels / n
    sds = np.sqrt((drawn @ levels ** 2 - n * means ** 2) / (n - 1))
    t = (means - flags.mean()) / (sds / np.sqrt(n))
    se = flags.std(ddof=1) / np.sqrt(n)
    t_lo, t_hi = np.quantile(t, [0.025, 0.975])
    assert (lo, hi) == pytest.approx((flags.mean() - t_hi * se, flags.mean() - t_lo * se),
                                     rel=1e-9)
    latencies = rng.lognormal(size=30_000)
    lo, hi, method = mean_ci(latencies)
    half = NormalDist().inv_cdf(0.975) * latencies.std(ddof=1) / np.sqrt(len(latencies))
    assert method == "normal" and (lo, hi) == pytest.approx((latencies.mean() - half,
                                                             latencies.mean() + half))
    assert mean_ci(rng.lognormal(size=500))[2] == "bootstrap-t"


@pytest.mark.parametrize("q", [0.1, 1.0, 50.0, 99.0, 99.9])
@pytest.mark.parametrize("n", [5, 29, 200])
def test_a_percentiles_interval_holds_its_own_value(q, n):
    """The p99.9 of 29 values was 28.972 with the interval [29.0, open): the order-statistic
    bound sat inside numpy's interpolation. A bound is moved out to the value there (a wider
    interval covers no less often)."""
    x = np.random.default_rng(n).lognormal(0, 1, n)
    recs = [{"record_id": f"r{i}", "latency_s": float(v)} for i, v in enumerate(x)]
    name = f"p{q:g}".replace(".", "_")
    row = by_metric(LatencyMetric("l", LatencyConfig(percentiles=[q]), None).compute(
        connect(recs)))[f"l.{name}"]
    assert row["value"] == pytest.approx(np.percentile(x, q))
    assert row["ci_low"] is None or row["ci_low"] <= row["value"]
    assert row["ci_high"] is None or row["value"] <= row["ci_high"]
