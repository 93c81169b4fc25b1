"""Resamples stacked in one table give every metric the values it has on each resample
alone: the comparison's rows are the same with stacking and without."""

from __future__ import annotations

import math

import pytest

from evalkit.comparison import _compare, _stacked, compare_runs
from tests.comparison.test_compare_runs import write_run

METRICS = {
    "flag_rate": {"plugin": "rate", "judge": "g", "slice_by": ["model"]},
    "score": {"plugin": "mean", "judge": "g", "slice_by": ["model", "output"]},
}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    a = [i % 4 == 0 for i in range(60)]
    b = [i % 3 == 0 for i in range(60)]
    outputs = [f"answer {i % 5}" for i in range(60)]  # slices with few records
    return (write_run(runs, "A", a, outputs, METRICS), write_run(runs, "B", b, outputs, METRICS))


def _rows(a, b):
    return {(r["metric"], r["slice"]): r for r in compare_runs(a, b, n_boot=50,
                                                               max_boot=50).rows}


def test_stacked_resamples_give_the_same_comparison(pair, monkeypatch):
    a, b = pair
    calls = []
    real = _compare.stacked_values
    monkeypatch.setattr(_compare, "stacked_values",
                        lambda *args, **kw: calls.append(1) or real(*args, **kw))
    stacked = _rows(a, b)
    assert calls  # the stacked path ran
    monkeypatch.setattr(_stacked, "STACKABLE", frozenset())
    plain = _rows(a, b)
    assert stacked.keys() == plain.keys() and len(plain) > 10
    for key, row in plain.items():
        for field in ("delta", "ci_low", "ci_high", "p_value", "n_resamples"):
            x, y = row.get(field), stacked[key].get(field)
            if isinstance(x, float) and isinstance(y, float) and math.isfinite(x):
                assert y == pytest.approx(x, abs=1e-12), (key, field)
            else:
                assert x == y, (key, field)


def test_each_resample_gets_its_own_values(pair, tmp_path):
    from evalkit.comparison._recompute import RunTables, samples, values

    run = RunTables(pair[0], tmp_path)
    metrics = run.metrics()
    ids = sorted(run.ids)
    assert sorted(_stacked.stackable(run, metrics)) == ["flag_rate", "score"]
    stacked = _stacked.stacked_values(run, metrics, samples(ids, 7, 3, 0), len(ids), 7, {})
    for i, sample in enumerate(samples(ids, 7, 3, 0)):
        run.use(sample)
        for key, row in values(run, metrics).items():
            got = stacked[key][i]
            assert (math.isnan(got) if row.value is None else
                    got == pytest.approx(row.value, abs=1e-12)), (key, i)
