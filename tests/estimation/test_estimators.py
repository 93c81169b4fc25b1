"""The estimators against their references: ppi_py for PPI++, exact finite-population
checks for the IPW forms, and the Rogan–Gladen correction's algebra."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.estimation import (
    expected_half_widths,
    human_mean,
    ipw_mean,
    judge_mean,
    ppi_mean,
    ppi_paired_difference,
    rogan_gladen,
)

ppi_py = pytest.importorskip("ppi_py")


def _sample(seed: int, n: int, big_n: int, binary: bool):
    rng = np.random.default_rng(seed)
    truth = rng.random(n + big_n) < 0.3 if binary else rng.normal(2.0, 1.0, n + big_n)
    truth = truth.astype(float)
    noise = rng.random(n + big_n) < 0.2
    judge = np.where(noise, 1 - truth, truth) if binary else \
        0.7 * truth + rng.normal(0.0, 0.8, n + big_n)
    return truth[:n], judge[:n], judge[n:]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("seed,n,big_n", [(0, 30, 270), (1, 200, 5000), (2, 7, 40)])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_ppi_plus_plus_equals_ppi_py(binary, seed, n, big_n, confidence):
    y, f, f_u = _sample(seed, n, big_n, binary)
    est = ppi_mean(y, f, f_u, confidence)
    assert est.value == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, f, f_u)[0]),
                                      abs=1e-9)
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=1 - confidence)
    assert est.low == pytest.approx(float(low[0]), abs=1e-9)
    assert est.high == pytest.approx(float(high[0]), abs=1e-9)
    assert 0.0 <= est.details["lambda"] <= 1.0


def test_ppi_with_a_fixed_lambda_equals_ppi_py_and_lambda_zero_is_human_only():
    y, f, f_u = _sample(3, 40, 400, True)
    for lam in (0.0, 0.5, 1.0):
        est = ppi_mean(y, f, f_u, 0.95, lam=lam)
        low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, lam=lam)
        assert (est.low, est.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)
    assert ppi_mean(y, f, f_u, 0.95, lam=0.0).value == pytest.approx(y.mean())


def test_ppi_refuses_fewer_than_two_labels_and_a_census_is_exact():
    assert ppi_mean(np.array([1.0]), np.array([1.0]), np.zeros(5)).undefined
    est = ppi_mean(np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, 0.0]), np.zeros(0))
    assert est.value == est.low == est.high == pytest.approx(2 / 3)


def test_labels_that_all_agree_are_refused_rather_than_a_zero_width_interval():
    est = ppi_mean(np.ones(5), np.array([1.0, 0, 1, 0, 1]), np.array([0.0, 1, 1, 0]))
    assert est.value is None and "no spread" in est.undefined


def test_a_constant_judge_gives_lambda_zero():
    y = np.array([1.0, 0.0, 1.0, 1.0])
    est = ppi_mean(y, np.ones(4), np.ones(10))
    assert est.details["lambda"] == 0.0 and est.value == pytest.approx(0.75)


def _population(seed: int, big_n: int = 2000):
    rng = np.random.default_rng(seed)
    y = (rng.random(big_n) < 0.25).astype(float)
    f = np.clip(0.6 * y + rng.normal(0.2, 0.2, big_n), 0, 1)
    return y, f


def test_stratified_ipw_is_unbiased_and_covers_over_repeated_draws():
    y_all, f_all = _population(4)
    strata_all = (f_all > 0.5).astype(int)
    sizes = {0: 40, 1: 40}  # equal counts from unequal strata: unequal probabilities
    rng = np.random.default_rng(5)
    values, covered = [], 0
    for _ in range(400):
        idx = np.concatenate([rng.choice(np.flatnonzero(strata_all == s), k, replace=False)
                              for s, k in sizes.items()])
        pi = np.array([sizes[s] / np.count_nonzero(strata_all == s) for s in strata_all[idx]])
        est = ipw_mean(f_all, idx, y_all[idx], pi, strata_all[idx], 0.9, finite=True)
        values.append(est.value)
        covered += est.low <= y_all.mean() <= est.high
    assert np.mean(values) == pytest.approx(y_all.mean(), abs=0.005)
    assert 0.86 <= covered / 400 <= 0.94


def test_poisson_ipw_is_unbiased_and_covers_over_repeated_draws():
    y_all, f_all = _population(6)
    pi_all = np.clip(0.02 + 0.15 * (1 - np.abs(f_all - 0.5) * 2), 0.01, 1)
    rng = np.random.default_rng(7)
    values, covered, human = [], 0, []
    for _ in range(400):
        idx = np.flatnonzero(rng.random(len(y_all)) < pi_all)
        est = ipw_mean(f_all, idx, y_all[idx], pi_all[idx], None, 0.9, finite=True)
        values.append(est.value)
        covered += est.low <= y_all.mean() <= est.high
        human.append(ipw_mean(f_all, idx, y_all[idx], pi_all[idx], None, 0.9,
                              use_judge=False, finite=True).half_width / est.half_width)
    assert np.mean(values) == pytest.approx(y_all.mean(), abs=0.005)
    assert 0.86 <= covered / 400 <= 0.94
    assert np.median(human) > 1  # the judge narrows the interval


def test_ipw_with_every_record_labelled_is_exact_for_these_records():
    y_all, f_all = _population(8, 50)
    idx = np.arange(50)
    est = ipw_mean(f_all, idx, y_all, np.ones(50), None, finite=True)
    assert est.value == est.low == est.high == pytest.approx(y_all.mean())
    # for the rate of the process they come from, 50 records are still a sample of it
    est = ipw_mean(f_all, idx, y_all, np.ones(50), None, finite=False)
    assert est.low < y_all.mean() < est.high


def test_rogan_gladen_is_the_maximum_likelihood_correction():
    # 1000 records, truth 30% flagged; the judge finds 80% of them and passes 90% of the rest.
    # The 30 labels are a random sample of these records, so the judge's verdict on all 1000
    # tells the sensitivity and specificity too: their maximum-likelihood values (Tenenbein
    # 1970) put in Rogan and Gladen's formula give the predictive-value form
    # sum_v share(v) * P(human flags | verdict v)
    flags = np.array([1] * 240 + [0] * 60 + [1] * 70 + [0] * 630, dtype=float)
    y = np.array([1] * 10 + [0] * 20, dtype=float)
    f = np.array([1] * 8 + [0] * 2 + [1] * 2 + [0] * 18, dtype=float)
    est = rogan_gladen(flags, y, f, 0.95)
    p, ppv, fomr = 0.31, 8 / 10, 2 / 20
    value = p * ppv + (1 - p) * fomr
    q1, q0 = p * ppv / value, (1 - p) * (1 - fomr) / (1 - value)
    assert est.value == pytest.approx(value)
    assert est.value == pytest.approx((p + q0 - 1) / (q0 + q1 - 1))
    assert est.details["sensitivity"] == pytest.approx(q1)
    assert est.details["specificity"] == pytest.approx(q0)
    assert est.details["labelled_sensitivity"] == pytest.approx(0.8)
    assert est.low < est.value < est.high


def test_rogan_gladen_refuses_a_chance_judge_and_too_few_labels():
    flags = np.array([1, 0] * 50, dtype=float)
    y = np.array([1] * 6 + [0] * 6, dtype=float)
    assert "chance" in rogan_gladen(flags, y, np.array([0, 1] * 6, dtype=float)).undefined
    assert "too few" in rogan_gladen(flags, y[:8], y[:8]).undefined


def test_judge_and_human_means_use_wilson_for_verdicts():
    est = judge_mean(np.array([1.0, 0.0, 0.0, 0.0]))
    assert est.details["ci_method"] == "wilson" and est.value == 0.25
    assert human_mean(np.array([0.0, 0.0, 0.0])).high > 0


def test_expected_half_width_shrinks_with_correlation_and_budget():
    widths = expected_half_widths(100, 1000, 0.3)
    assert widths[0.0] > widths[0.5] > widths[0.8]
    assert expected_half_widths(400, 1000, 0.3)[0.0] < widths[0.0]


def test_the_paired_difference_is_ppi_on_per_record_differences():
    rng = np.random.default_rng(11)
    n_all = 500
    y_a = (rng.random(n_all) < 0.3).astype(float)
    y_b = np.where(rng.random(n_all) < 0.2, 1 - y_a, y_a)
    f_a = np.where(rng.random(n_all) < 0.15, 1 - y_a, y_a)
    f_b = np.where(rng.random(n_all) < 0.15, 1 - y_b, y_b)
    labelled = np.zeros(n_all, dtype=bool)
    labelled[rng.choice(n_all, 80, replace=False)] = True
    est = ppi_paired_difference(y_a, y_b, f_a, f_b, labelled, 0.9)
    d_y, d_f = (y_b - y_a)[labelled], f_b - f_a
    low, high = ppi_py.ppi_mean_ci(d_y, d_f[labelled], d_f[~labelled], alpha=0.1)
    assert (est.low, est.high) == pytest.approx((low[0], high[0]), abs=1e-9)
    assert est.details["paired"] and est.details["n_labelled"] == 80


def test_the_t_quantile_matches_scipy():
    from scipy.stats import t

    from evalkit.estimation._estimate import t_value

    # exact at every df: a stratum of two labels has df 1, where t is 12.71 at 95% (an
    # expansion around the normal gave 11.30)
    for df in (1, 1.5, 2, 3, 5, 14, 60, 1e4):
        for c in (0.8, 0.9, 0.95, 0.99):
            assert t_value(c, df) == pytest.approx(t.ppf(0.5 + c / 2, df), rel=1e-10)


def test_a_judge_or_human_mean_without_an_interval_says_why():
    """A judge that gives 0.7 to every record had a mean, no interval and no reason (the
    corrected metric's .judge row broke the metrics' rule: a value without an interval says
    why in ci_open); n_boot 0 asks for none."""
    est = judge_mean(np.full(12, 0.7))
    assert est.value == pytest.approx(0.7) and est.low is None
    assert "no spread" in est.details["ci_open"] and est.details.get("ci_method") is None
    one = human_mean(np.array([0.4]))
    assert one.low is None and "one value" in one.details["ci_open"]
    assert "ci_open" not in judge_mean(np.full(12, 0.7), n_boot=0).details
