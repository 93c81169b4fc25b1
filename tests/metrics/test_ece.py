"""ece: the pinned binning convention, an independent implementation and scikit-learn on
random data, and the edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from evalkit.metrics.ece import EceConfig, ExpectedCalibrationError, bin_index
from tests.metrics.run_tables import by_metric, connect


def run_on(p, y, **kw):
    records = [{"record_id": f"r{i}", "confidence": pi, "human_label": None if yi is None
                else str(yi), "model": "m" if i % 2 else "n"} for i, (pi, yi) in
               enumerate(zip(p, y, strict=True))]
    cfg = EceConfig(**{"correct": "human_label", "n_boot": 0, **kw})
    cfg.validate()
    return ExpectedCalibrationError("ece", cfg, None).compute(connect(records))


def naive_ece(p, y, n_bins):
    """A plain loop: bins [lo, hi), 1.0 in the last one."""
    total = 0.0
    worst = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i, pi in enumerate(p) if lo <= pi < hi or (b == n_bins - 1
                                                                     and pi == 1.0)]
        if not members:
            continue
        conf = sum(p[i] for i in members) / len(members)
        acc = sum(y[i] for i in members) / len(members)
        total += len(members) / len(p) * abs(acc - conf)
        worst = max(worst, abs(acc - conf))
    return total, worst


@pytest.mark.parametrize("p,y,bins,expected", [
    # 0.5 falls in [0.5, 1.0): libraries that close bins on the right put it in bin 0
    ([0.5, 0.9, 0.1], [0, 1, 0], 2, 0.1667),
    # 1.0 belongs to the last bin [0.9, 1.0]
    ([0.95, 1.0], [1, 0], 10, 0.475),
    # 0.29 is in [0.29, 0.30) though 0.29 * 100 = 28.999999999999996 (int() said bin 28)
    ([0.29, 0.285], [1, 0], 100, 0.4975),
    ([0.57, 0.565], [1, 0], 100, (0.43 + 0.565) / 2),
    ([0.58, 0.575], [1, 0], 50, (0.42 + 0.575) / 2),
])
def test_pinned_convention(p, y, bins, expected):
    rows = by_metric(run_on(p, y, n_bins=bins))
    assert rows["ece"]["value"] == pytest.approx(expected, abs=1e-4)


def test_against_an_independent_implementation_and_scikit_learn():
    rng = np.random.default_rng(5)
    p = rng.random(400)
    y = (rng.random(400) < p ** 1.5).astype(int)
    rows = by_metric(run_on(p.tolist(), y.tolist(), n_bins=10))
    ece, mce = naive_ece(p, y, 10)
    assert rows["ece"]["value"] == pytest.approx(ece)
    assert rows["ece.mce"]["value"] == pytest.approx(mce)
    assert rows["ece.brier"]["value"] == pytest.approx(brier_score_loss(y, p))
    # the reliability table matches scikit-learn's uniform bins (no value sits on an edge)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    bins = [b for b in rows["ece"]["details"]["bins"] if b["count"]]
    assert [b["accuracy"] for b in bins] == pytest.approx(prob_true.tolist())
    assert [b["mean_confidence"] for b in bins] == pytest.approx(prob_pred.tolist())
    assert sum(b["count"] for b in bins) == 400


def test_width_bins_follow_the_edges_exactly_at_every_bin_count():
    for n_bins in (10, 20, 50, 100, 1000):
        edges = np.arange(n_bins + 1) / n_bins
        p = np.concatenate([edges, np.nextafter(edges, -1), np.nextafter(edges, 2)])
        p = p[(p >= 0) & (p <= 1)]
        got = bin_index(p[None, :], n_bins, "width")[0]
        want = [n_bins - 1 if x == 1.0 else next(b for b in range(n_bins)
                                                 if edges[b] <= x < edges[b + 1]) for x in p]
        assert got.tolist() == want, n_bins


def test_equal_mass_bins_do_not_depend_on_record_order():
    # ties at 0.5 with mixed outcomes: splitting them by record order moved MCE
    p = [0.2, 0.5, 0.5, 0.5, 0.5, 0.9]
    y = [0, 1, 0, 1, 0, 1]
    results = set()
    for perm in ([0, 1, 2, 3, 4, 5], [0, 2, 4, 1, 3, 5], [5, 4, 3, 2, 1, 0]):
        rows = by_metric(run_on([p[i] for i in perm], [y[i] for i in perm], n_bins=3,
                                binning="mass"))
        results.add((round(rows["ece"]["value"], 12), round(rows["ece.mce"]["value"], 12)))
        bins = rows["ece"]["details"]["bins"]
        # the run of 0.5s sits wholly in one bin
        assert sum(1 for b in bins if b["lo"] is not None and b["lo"] <= 0.5 <= b["hi"]) == 1
    assert len(results) == 1


def test_equal_mass_bins_hold_equal_counts():
    rng = np.random.default_rng(2)
    p = rng.random(100) ** 3  # skewed: equal-width bins would be very uneven
    y = (rng.random(100) < p).astype(int)
    rows = by_metric(run_on(p.tolist(), y.tolist(), n_bins=5, binning="mass"))
    counts = [b["count"] for b in rows["ece"]["details"]["bins"]]
    assert counts == [20] * 5
    order = np.argsort(p)
    expected = sum(abs(y[c].mean() - p[c].mean()) * len(c)
                   for c in np.array_split(order, 5)) / 100
    assert rows["ece"]["value"] == pytest.approx(expected)


def test_only_the_brier_score_has_an_interval_and_ece_says_why_not():
    """The binned ECE is biased upward by noise: a bootstrap interval around it covered the
    population's ECE 1% of the time at 20 records (bench/bench_coverage.py)."""
    rng = np.random.default_rng(9)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    rows = by_metric(run_on(p.tolist(), y.tolist(), n_boot=200))
    brier = rows["ece.brier"]
    assert brier["ci_low"] <= brier["value"] <= brier["ci_high"]
    for name in ("ece", "ece.mce"):
        assert rows[name]["ci_low"] is None and rows[name]["ci_high"] is None
        assert "biased upward" in rows[name]["details"]["ci_open"]


def test_out_of_range_missing_and_non_binary_values_are_unscored():
    rows = by_metric(run_on([0.2, 1.5, None, 0.7, 0.4], [0, 1, 1, None, 2]))
    ece = rows["ece"]
    assert (ece["n_judged"], ece["n_unscored"]) == (1, 4)
    reasons = ece["details"]["unscored_reasons"]
    assert any("outside [0, 1]" in k for k in reasons["prob"])
    assert any("not 0 or 1" in k for k in reasons["correct"])
    assert ece["value"] == pytest.approx(0.2)  # the single usable record


def test_empty_slice_and_all_excluded_are_undefined():
    empty = ExpectedCalibrationError("ece", EceConfig(correct="human_label"), None).compute(
        connect([]))
    assert all(r["value"] is None and "undefined" in r["details"] for r in empty)
    con = connect([{"record_id": "1", "confidence": 0.5, "human_label": "1",
                    "excluded_by": "f"}])
    rows = by_metric(ExpectedCalibrationError("ece", EceConfig(correct="human_label"),
                                              None).compute(con))
    assert rows["ece"]["value"] is None and rows["ece"]["n_excluded"] == 1


def test_confidence_and_correctness_from_judges():
    con = connect([{"record_id": str(i)} for i in range(4)],
                  [*({"record_id": str(i), "judge": "conf", "value": v}
                     for i, v in enumerate([0.9, 0.8, 0.3, 0.2])),
                   *({"record_id": str(i), "judge": "grader", "passed": ok}
                     for i, ok in enumerate([True, False, False, False]))])
    cfg = EceConfig(prob="judge:conf", correct="judge:grader:passed", n_bins=2, n_boot=0)
    cfg.validate()
    rows = by_metric(ExpectedCalibrationError("ece", cfg, None).compute(con))
    # bin [0, .5): conf .25, acc 0; bin [.5, 1]: conf .85, acc .5
    assert rows["ece"]["value"] == pytest.approx(0.5 * 0.25 + 0.5 * 0.35)


def test_slices():
    rows = run_on([0.1, 0.9, 0.2, 0.8], [0, 1, 0, 1], slice_by=["model"])
    assert {r["slice"] for r in rows} == {"all", "model=m", "model=n"}


@pytest.mark.parametrize("kw,msg", [({"correct": None}, "correct"), ({"binning": "q"},
                                                                     "binning"),
                                    ({"n_bins": 0}, "n_bins"), ({"prob": "judge:"}, "judge")])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        EceConfig(**{"correct": "human_label", **kw}).validate()
