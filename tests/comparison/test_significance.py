"""The comparison library's tests against their references: McNemar's exact test against
statsmodels and scipy, the multiplicity corrections against statsmodels' multipletests, the
gate's false-alarm rate on null data and its power on a known regression."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from evalkit.comparison import (
    adjust,
    bootstrap_test,
    gate_test,
    lone_alpha,
    mcnemar_exact,
    mde_mcnemar,
    mde_normal,
    parse_gate,
)


@pytest.mark.parametrize(("worse", "better"), [(0, 0), (1, 0), (9, 0), (3, 7), (12, 12),
                                               (40, 25), (0, 30)])
def test_mcnemar_matches_statsmodels_and_scipy(worse, better):
    table = [[50, worse], [better, 50]]
    expected = mcnemar(table, exact=True).pvalue
    assert mcnemar_exact(worse, better) == pytest.approx(expected, rel=1e-12)
    if worse + better:
        one = binomtest(worse, worse + better, 0.5, alternative="greater").pvalue
        assert mcnemar_exact(worse, better, "greater") == pytest.approx(one, rel=1e-12)


@pytest.mark.parametrize("method,reference", [("holm", "holm"), ("bh", "fdr_bh")])
def test_corrections_match_statsmodels(method, reference):
    rng = np.random.default_rng(4)
    for size in (1, 2, 7, 40):
        p = np.concatenate([rng.random(size) ** 3, [0.01, 0.01]])  # ties too
        _, expected, _, _ = multipletests(p, alpha=0.05, method=reference)
        assert adjust(list(p), method) == pytest.approx(list(expected), rel=1e-12)
    # a row with no test is not in the family
    got = adjust([0.01, None, 0.04], method)
    _, expected, _, _ = multipletests([0.01, 0.04], method=reference)
    assert got[1] is None and [got[0], got[2]] == pytest.approx(list(expected))
    assert adjust([0.01, 0.04], "none") == [0.01, 0.04]
    with pytest.raises(ValueError, match="not one of holm, bh, none"):
        adjust([0.1], "bonferroni")


def test_lone_alpha_and_minimum_detectable_effects():
    assert lone_alpha(0.05, 10, "holm") == pytest.approx(0.005)
    assert lone_alpha(0.05, 10, "none") == 0.05
    # two-sided 5%, 80% power: (1.96 + 0.8416) × se
    assert mde_normal(0.01, 0.05) == pytest.approx(0.028016, abs=1e-5)
    # no flip at all: the exact test still needs 6 records flipped one way at 5%
    assert mde_mcnemar(100, 0, 0.05) == pytest.approx(0.06)
    assert 2 * 0.5 ** 6 <= 0.05 < 2 * 0.5 ** 5
    assert mde_mcnemar(100, 40, 0.05) == pytest.approx((1.959964 + 0.841621) * np.sqrt(0.004),
                                                       rel=1e-5)


def test_bootstrap_p_value_is_the_dual_of_the_percentile_interval():
    rng = np.random.default_rng(0)
    for shift in (0.0, 0.05, 0.2, 0.4):
        d = rng.normal(shift, 0.1, 4000)
        lo, hi = np.quantile(d, [0.025, 0.975])
        t = bootstrap_test(d)
        excludes = lo > 0 or hi < 0
        if abs(t.p_value - 0.05) > 3 * t.mc_error:
            assert (t.p_value < 0.05) == excludes
    assert bootstrap_test(np.zeros(100)).p_value == 1.0


def test_gate_forms():
    g = parse_gate("echo_rate:+0.02")
    assert (g.metric, g.slice, g.tolerance, g.worse) == ("echo_rate", "all", 0.02, "up")
    g = parse_gate("accuracy@model=a:-0.01")
    assert (g.metric, g.slice, g.worse) == ("accuracy", "model=a", "down")
    assert parse_gate("latency.p95:0").worse is None
    assert str(parse_gate("x@s=1:+.5")) == "x@s=1:+0.5"
    for bad in ("echo_rate", "echo_rate:+", "echo_rate:up", ":0.1", "x:--1"):
        with pytest.raises(ValueError, match="METRIC"):
            parse_gate(bad)


def _binary_runs(rng, n, p_flag, worse_share):
    """Paired 0/1 outcomes: judge noise flips a tenth of the records, as many each way (no
    change in the rate), and ``worse_share`` of the records not flagged become flagged."""
    a = rng.random(n) < p_flag
    b = a.copy()
    churn = rng.random(n) < 0.1
    up = rng.random(n) < 0.5
    a[churn], b[churn] = ~up[churn], up[churn]
    b[(rng.random(n) < worse_share) & ~a] = True
    return a.astype(float), b.astype(float)


def test_the_gate_keeps_its_false_alarm_rate_on_null_changes_and_catches_a_regression():
    rng = np.random.default_rng(7)
    alarms = caught = 0
    sims = 1000
    for _ in range(sims):
        a, b = _binary_runs(rng, 200, 0.3, 0.0)
        worse, better = int(np.sum(b > a)), int(np.sum(b < a))
        alarms += gate_test(0.0, flips=(worse, better))[1] <= 0.025
        a, b = _binary_runs(rng, 200, 0.3, 0.2)
        worse, better = int(np.sum(b > a)), int(np.sum(b < a))
        caught += gate_test(0.0, flips=(worse, better))[1] <= 0.025
    # exact test: at most the nominal one-sided 2.5% (+ Monte-Carlo noise of 1000 draws)
    assert alarms / sims <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / sims)
    assert caught / sims > 0.9


def test_the_bootstrap_gate_holds_its_level_with_a_tolerance():
    rng = np.random.default_rng(11)
    sims, n, boot = 300, 80, 400
    alarms = 0
    for _ in range(sims):
        d = rng.normal(0.02, 0.3, n)  # worse by exactly the tolerance: the edge of the null
        idx = rng.integers(0, n, (boot, n))
        alarms += gate_test(0.02, d[idx].mean(axis=1))[1] <= 0.025
    assert alarms / sims <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / sims) + 0.02
