import math

import numpy as np
import pytest

from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._stats import _resampled, bootstrap_ci, mean_ci
from evalkit.metrics.mean import MeanMetric
from tests.metrics.run_tables import rows_by
from tests.metrics.run_tables import run_dir_connection as connect

RECORDS_ROWS = [
    {"record_id": "a", "model": "m1"},
    {"record_id": "b", "model": "m1"},
    {"record_id": "c", "model": "m2", "excluded_by": "pipeline_failure",
     "exclude_reason": "level=ERROR"},
    {"record_id": "d", "model": "m2"},
    {"record_id": "e", "model": "m2", "excluded_by": "sample", "exclude_reason": "no"},
]
# an imported judge scores every record, failed ones included
JUDG = [
    {"record_id": "a", "judge": "H", "value": 0.2, "status": "ok"},
    {"record_id": "b", "judge": "H", "value": 0.4, "status": "ok"},
    {"record_id": "c", "judge": "H", "value": 1.0, "status": "ok"},
    {"record_id": "d", "judge": "H", "value": None, "status": "error", "error": "timeout"},
    {"record_id": "e", "judge": "H", "value": 0.9, "status": "ok"},
]


def test_raw_filtered_and_filter_effect(tmp_path):
    con = connect(tmp_path, RECORDS_ROWS, JUDG)
    rows = rows_by(MeanMetric("h", JudgeMetricConfig(judge="H", slice_by=["model"]),
                              None).compute(con))
    filt, raw, effect = rows[("h", "all")], rows[("h.raw", "all")], \
        rows[("h.filter_effect", "all")]
    assert filt["value"] == pytest.approx(0.3)
    assert raw["value"] == pytest.approx((0.2 + 0.4 + 1.0 + 0.9) / 4)
    assert effect["value"] == pytest.approx(raw["value"] - filt["value"])
    # denominators: 5 records, 2 excluded, 2 scored included, d unscored
    assert (filt["n_attempted"], filt["n_excluded"], filt["n_judged"], filt["n_unscored"]) == \
        (5, 2, 2, 1)
    assert (raw["n_judged"], raw["n_unscored"]) == (4, 1)
    by_filter = effect["details"]["by_filter"]
    assert by_filter == {"pipeline_failure": {"n_excluded": 1, "n_scored": 1, "mean": 1.0},
                         "sample": {"n_excluded": 1, "n_scored": 1, "mean": 0.9}}
    # slices
    assert rows[("h", "model=m1")]["value"] == pytest.approx(0.3)
    assert rows[("h", "model=m2")]["value"] is None  # d errored, c and e excluded
    assert rows[("h.raw", "model=m2")]["value"] == pytest.approx(0.95)
    assert "undefined" in rows[("h", "model=m2")]["details"]


def test_a_rerun_judgment_counts_its_ok_copy(tmp_path):
    # record d was judged twice (an error, then an ok rerun): the ok one counts, every field
    # from that one judgment, as in the pair metrics, whatever order they were written in
    errored = {"record_id": "d", "judge": "H", "value": 0.0, "status": "error"}
    rerun = {"record_id": "d", "judge": "H", "value": 0.6, "status": "ok"}
    for judg in ([*JUDG[:3], errored, JUDG[4], rerun], [rerun, *JUDG[:3], errored, JUDG[4]]):
        run = tmp_path / str(len(list(tmp_path.iterdir())))
        run.mkdir()
        rows = rows_by(MeanMetric("h", JudgeMetricConfig(judge="H"), None)
                       .compute(connect(run, RECORDS_ROWS, judg)))
        assert rows[("h", "all")]["value"] == pytest.approx((0.2 + 0.4 + 0.6) / 3)
        assert rows[("h", "all")]["n_unscored"] == 0


def test_bootstrap_ci_brackets_the_mean_and_is_seeded(tmp_path):
    recs = [{"record_id": str(i)} for i in range(200)]
    judg = [{"record_id": str(i), "judge": "H", "value": (i % 10) / 10, "status": "ok"}
            for i in range(200)]
    con = connect(tmp_path, recs, judg)
    metric = MeanMetric("h", JudgeMetricConfig(judge="H", raw=False), None)
    first = metric.compute(con)[0]
    assert first["ci_low"] < first["value"] < first["ci_high"]
    assert first["ci_high"] - first["ci_low"] < 0.15
    assert metric.compute(con)[0]["ci_low"] == first["ci_low"]
    no_ci = MeanMetric("h", JudgeMetricConfig(judge="H", raw=False, n_boot=0), None)
    assert no_ci.compute(con)[0]["ci_low"] is None


def test_skipped_judge_note_and_unknown_judge(tmp_path):
    judg = [{"record_id": "a", "judge": "E", "value": 1.0, "status": "ok"},
            {"record_id": "b", "judge": "E", "value": 0.0, "status": "ok"},
            {"record_id": "c", "judge": "E", "status": "skipped"},
            {"record_id": "d", "judge": "E", "value": 0.0, "status": "ok"},
            {"record_id": "e", "judge": "E", "status": "skipped"}]
    con = connect(tmp_path, RECORDS_ROWS, judg)
    rows = rows_by(MeanMetric("e", JudgeMetricConfig(judge="E"), None).compute(con))
    # the judge skipped the excluded records: there is no value before filters, and the
    # filters' effect is not 0 by construction but unknown, each saying why
    raw, effect = rows[("e.raw", "all")], rows[("e.filter_effect", "all")]
    assert raw["value"] is None and "no value before filters" in raw["details"]["undefined"]
    assert effect["value"] is None and "no value before filters" in \
        effect["details"]["undefined"]
    missing = MeanMetric("x", JudgeMetricConfig(judge="nope"), None).compute(con)[0]
    assert missing["value"] is None
    assert "no judgments from judge 'nope'" in missing["details"]["undefined"]
    assert not math.isnan(rows[("e", "all")]["value"])


def test_resampling_matches_a_direct_bootstrap_and_degenerate_cases():
    values = np.random.default_rng(1).random(500)
    # the same draws as a direct expanded percentile bootstrap over the sorted values (one
    # block holds every resample): the tails at Φ(−√(n/(n−1))·t₀.₉₇₅,ₙ₋₁), Hesterberg 2015
    from scipy import stats

    idx = np.random.default_rng(0).integers(0, 500, size=(1000, 500))
    tail = stats.norm.cdf(-np.sqrt(500 / 499) * stats.t.ppf(0.975, 499))
    direct = np.quantile(np.sort(values)[idx].mean(axis=1), [tail, 1 - tail])
    assert _resampled(values, np.mean, 1000, 0, 0.95) == pytest.approx(tuple(direct))
    assert bootstrap_ci(values[:1]) == (None, None)
    assert bootstrap_ci(values, n_boot=0) == (None, None)
    assert bootstrap_ci(values, np.median)[0] < np.median(values) < bootstrap_ci(values,
                                                                                  np.median)[1]


def test_mean_ci_methods_agree_with_resampling_records():
    rng = np.random.default_rng(3)
    flags = (rng.random(2000) < 0.3).astype(float)  # a proportion: Wilson's interval
    lo, hi, method = mean_ci(flags, 2000, 0, 0.95)
    ref = _resampled(flags, np.mean, 2000, 0, 0.95)
    assert method == "wilson"
    assert lo == pytest.approx(ref[0], abs=0.006) and hi == pytest.approx(ref[1], abs=0.006)
    likert = rng.integers(0, 5, 2000) / 4  # five levels: multinomial draws
    lo, hi, method = mean_ci(likert, 2000, 0, 0.95)
    ref = _resampled(likert, np.mean, 2000, 0, 0.95)
    assert method == "bootstrap-t"
    assert lo == pytest.approx(ref[0], abs=0.006) and hi == pytest.approx(ref[1], abs=0.006)
    scores = rng.random(30_000)  # many levels, many records: the normal interval
    lo, hi, method = mean_ci(scores, 1000, 0, 0.95)
    ref = _resampled(scores, np.mean, 1000, 0, 0.95)
    assert method == "normal"
    assert lo == pytest.approx(ref[0], abs=0.001) and hi == pytest.approx(ref[1], abs=0.001)
    assert mean_ci(scores[:1], 1000, 0, 0.95) == (None, None, None)


def test_signals_join_one_judgment_per_record_as_written_or_picked(tmp_path):
    """fetch() joins judgments as written when that gives one row per record (no duplicate
    check, no sort); a record judged twice makes it pick the ok judgment, for every judge
    joined, and a judgment of no record changes nothing."""
    from evalkit.metrics._signals import fetch, parse_spec

    specs = {"h": parse_spec("judge:H", "h"), "g": parse_spec("judge:G", "g")}
    others = [{**j, "judge": "G"} for j in JUDG]
    orphan = {"record_id": "zz", "judge": "H", "value": 0.5, "status": "ok"}
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    plain = fetch(connect(tmp_path / "1", RECORDS_ROWS, [*JUDG, orphan, *others]), specs, [])
    assert plain.column("h").to_pylist() == [0.2, 0.4, 1.0, None, 0.9]
    rerun = {"record_id": "d", "judge": "H", "value": 0.6, "status": "ok"}
    picked = fetch(connect(tmp_path / "2", RECORDS_ROWS, [rerun, *JUDG, *others]), specs, [])
    assert picked.column("record_id").to_pylist() == ["a", "b", "c", "d", "e"]
    assert picked.column("h").to_pylist() == [0.2, 0.4, 1.0, 0.6, 0.9]
    assert picked.column("h__status").to_pylist()[3] == "ok"
    assert picked.column("g").to_pylist() == plain.column("g").to_pylist()


@pytest.mark.parametrize("distinct", [3, 300, 70_000])
def test_value_groups_are_each_values_rows_in_order(distinct):
    """Slices by value: each distinct value (null too) in order of first appearance with its
    ascending row indices, whether the codes sort as 8-bit, 16-bit or wider keys."""
    import pyarrow as pa

    from evalkit.metrics._stats import value_groups

    rng = np.random.default_rng(distinct)
    picks = rng.integers(0, distinct + 1, 150_000)
    values = [None if p == distinct else f"v{p}" for p in picks.tolist()]
    column = pa.chunked_array([values[:70_000], values[70_000:]], pa.string())
    groups = value_groups(column)
    first = list(dict.fromkeys(values))
    assert [v for v, _ in groups] == first
    arr = np.array(["\0null" if v is None else v for v in values])
    for value, idx in groups[:50] + groups[-50:]:
        assert np.array_equal(idx, np.flatnonzero(arr == ("\0null" if value is None else value)))
