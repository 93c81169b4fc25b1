"""``evalkit compare``'s intervals against an independent paired bootstrap (scipy's), written
here from the run's Parquet files without evalkit's metric code, on several metric kinds and
on small samples. A cache that outlived the resamples made every interval collapse onto the
point difference ("95% CI [0.30, 0.30]", significant); these tests fail on that."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from evalkit.commands.compare import compare
from evalkit.comparison._recompute import RunTables
from evalkit.metrics._judged import judged_table
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import write_json, write_parquet
from tests.conftest import run_cli, run_dirs

N_BOOT = 300  # evalkit's resamples; scipy's are many more, so the noise is mostly evalkit's


def write_run(runs_dir: Path, run_id: str, values: list[float | None], excluded: list[bool],
              metrics: dict, latency: list[float] | None = None) -> Path:
    """A run of ``len(values)`` records, as the runner writes it: judge ``h``'s imported
    value per record (None: no usable score), some records excluded by a filter."""
    run_dir = runs_dir / "exp" / run_id
    (run_dir / "judgments").mkdir(parents=True)
    ids = [f"r{i:03d}" for i in range(len(values))]
    write_parquet(conform([{"run_id": run_id, "record_id": r, "model": "ab"[i % 2],
                            "excluded_by": "level" if excluded[i] else None,
                            "latency_s": None if latency is None else latency[i]}
                           for i, r in enumerate(ids)], RECORDS), run_dir / "records.parquet")
    write_parquet(conform([{"run_id": run_id, "record_id": r, "judge": "h", "value": v,
                            "passed": None if v is None else bool(v < 0.5),
                            "status": "ok" if v is not None else "error",
                            "origin": "imported"}
                           for r, v in zip(ids, values, strict=True)], JUDGMENTS),
                  run_dir / "judgments" / "part-00000.parquet")
    write_json({"run_id": run_id, "experiment": "exp", "status": "ok",
                "config": {"metrics": metrics}}, run_dir / "manifest.json")
    return run_dir


def per_record(run_dir: Path, judge: str, ids: list[str]) -> dict[str, np.ndarray]:
    """Straight from the Parquet files: per shared record, whether it is included, the
    judge's value and whether it flagged the record (NaN unless status ok), and the
    latency."""
    rec = pq.read_table(run_dir / "records.parquet").to_pylist()
    jud = [j for j in pq.read_table(run_dir / "judgments").to_pylist() if j["judge"] == judge]
    by_rec = {r["record_id"]: r for r in rec}
    by_jud = {j["record_id"]: j for j in jud}
    ok = [by_jud[i] if i in by_jud and by_jud[i]["status"] == "ok" else None for i in ids]
    return {"included": np.array([by_rec[i]["excluded_by"] is None for i in ids]),
            "value": np.array([np.nan if j is None or j["value"] is None else j["value"]
                               for j in ok], dtype=float),
            "flagged": np.array([np.nan if j is None or j["passed"] is None
                                 else float(not j["passed"]) for j in ok]),
            "latency": np.array([np.nan if by_rec[i]["latency_s"] is None
                                 else by_rec[i]["latency_s"] for i in ids], dtype=float)}


Stat = Callable[[np.ndarray, np.ndarray], float]


def rate_at(t: float) -> Stat:
    def stat(value: np.ndarray, included: np.ndarray) -> float:
        v = value[included & ~np.isnan(value)]
        return float(np.mean(v >= t)) if len(v) else np.nan
    return stat


def of_included(fn: Callable[[np.ndarray], float], at_least: int = 1) -> Stat:
    def stat(value: np.ndarray, included: np.ndarray) -> float:
        v = value[included & ~np.isnan(value)]
        return float(fn(v)) if len(v) >= at_least else np.nan
    return stat


def scipy_interval(a: dict[str, np.ndarray], b: dict[str, np.ndarray], stat: Stat,
                   column: str = "value") -> tuple[float, float]:
    """scipy's paired percentile bootstrap of stat(B) − stat(A) over the shared records."""
    def delta(va, ia, vb, ib):
        return stat(vb, ib.astype(bool)) - stat(va, ia.astype(bool))

    res = stats.bootstrap((a[column], a["included"], b[column], b["included"]), delta,
                          paired=True, vectorized=False, n_resamples=3000,
                          method="percentile", confidence_level=0.95,
                          rng=np.random.default_rng(7))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def row_of(rows: list[dict], metric: str, slice_: str = "all") -> dict:
    (row,) = [r for r in rows if r["metric"] == metric and r["slice"] == slice_]
    return row


def test_one_changed_score_among_ten_records_is_not_significant(tmp_path: Path) -> None:
    # 10 records, 3 set aside; B changes one imported score across the rate's threshold
    base = [0.2, 0.7, 0.1, 0.3, 0.9, 0.4, 0.2, 0.8, 0.6, 0.1]
    excluded = [False] * 7 + [True] * 3
    changed = list(base)
    changed[0] = 0.9
    metrics = {"h_rate": {"plugin": "rate", "judge": "h", "threshold": 0.5, "raw": False},
               "h_mean": {"plugin": "mean", "judge": "h", "raw": False}}
    a = write_run(tmp_path, "A", base, excluded, metrics)
    b = write_run(tmp_path, "B", changed, excluded, metrics)
    rows = compare(a, b, n_boot=N_BOOT, seed=3)
    ids = [f"r{i:03d}" for i in range(10)]
    pa_, pb = per_record(a, "h", ids), per_record(b, "h", ids)
    rate = row_of(rows, "h_rate")
    assert rate["delta"] == pytest.approx(1 / 7)
    lo, hi = scipy_interval(pa_, pb, rate_at(0.5))
    assert (lo, hi) == pytest.approx((0.0, 0.43), abs=0.03)  # the honest interval
    assert rate["ci_low"] == pytest.approx(lo, abs=0.03)
    assert rate["ci_high"] == pytest.approx(hi, abs=0.06)
    assert rate["significant"] is False
    mean = row_of(rows, "h_mean")
    lo, hi = scipy_interval(pa_, pb, of_included(np.mean))
    assert mean["ci_low"] == pytest.approx(lo, abs=0.02)
    assert mean["ci_high"] == pytest.approx(hi, abs=0.04)
    assert mean["significant"] is False


@pytest.mark.parametrize("n", [30])
def test_intervals_match_scipy_for_every_judged_kind(tmp_path: Path, n: int) -> None:
    rng = np.random.default_rng(n)
    base = rng.random(n)
    noisy = np.clip(base + rng.normal(0.08, 0.2, n), 0, 1)  # B: a small, noisy shift
    excluded = list(rng.random(n) < 0.2)
    latency = list(rng.gamma(2.0, 0.5, n))
    metrics = {"h_rate": {"plugin": "rate", "judge": "h", "threshold": 0.5, "raw": False},
               "h_mean": {"plugin": "mean", "judge": "h", "raw": False},
               "h_dist": {"plugin": "distribution", "judge": "h"},
               "lat": {"plugin": "distribution", "column": "latency_s"},
               "h_x": {"plugin": "crosstab", "judge": "h", "threshold": 0.5, "by": "model",
                       "include_excluded": False},
               "done": {"plugin": "task_completion", "outcome": "judge:h:passed"}}
    a = write_run(tmp_path, "A", list(base), excluded, metrics, latency)
    b = write_run(tmp_path, "B", list(noisy), excluded, metrics,
                  [x * 1.1 for x in latency])
    rows = compare(a, b, n_boot=N_BOOT, seed=5)
    ids = [f"r{i:03d}" for i in range(n)]
    pa_, pb = per_record(a, "h", ids), per_record(b, "h", ids)
    checks = [("h_rate", rate_at(0.5), "value"), ("h_mean", of_included(np.mean), "value"),
              ("h_dist", of_included(np.mean), "value"),
              ("h_dist.p50", of_included(lambda v: np.quantile(v, 0.5)), "value"),
              ("h_dist.std", of_included(lambda v: np.std(v, ddof=1), 2), "value"),
              ("lat", of_included(np.mean), "latency"),
              ("lat.p50", of_included(lambda v: np.quantile(v, 0.5)), "latency"),
              ("h_x.flagged", rate_at(0.5), "value"),
              ("done", of_included(lambda v: np.mean(v < 0.5)), "value")]
    for metric, stat, column in checks:
        row = row_of(rows, metric)
        lo, hi = scipy_interval(pa_, pb, stat, column)
        width = hi - lo
        assert width > 0, metric
        # the interval's ends move by a few percent of its width between bootstraps
        assert row["ci_low"] == pytest.approx(lo, abs=0.15 * width + 0.01), metric
        assert row["ci_high"] == pytest.approx(hi, abs=0.15 * width + 0.01), metric


def test_quickstart_against_a_looser_echo_threshold(tmp_path: Path) -> None:
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=tmp_path)
    run_cli("run", "+experiment=quickstart", "judges.prompt_echo.threshold=0.2",
            "runner.summary=false", cwd=tmp_path)
    a, b = run_dirs(tmp_path, "quickstart")
    rows = compare(a, b, n_boot=N_BOOT, only=["echo_rate"])
    rate = row_of(rows, "echo_rate")
    assert rate["delta"] == pytest.approx(0.30, abs=0.005)
    ids = sorted(r["record_id"] for r in pq.read_table(a / "records.parquet").to_pylist())
    pa_, pb = per_record(a, "prompt_echo", ids), per_record(b, "prompt_echo", ids)
    # the quickstart's echo_rate is the share of judgments not passed
    lo, hi = scipy_interval(pa_, pb, of_included(np.mean), "flagged")
    assert (lo, hi) == pytest.approx((0.22, 0.38), abs=0.02)  # the honest interval
    assert rate["ci_low"] == pytest.approx(lo, abs=0.025)
    assert rate["ci_high"] == pytest.approx(hi, abs=0.025)


def test_a_resample_never_sees_another_resamples_judged_table(tmp_path: Path) -> None:
    values = [0.1, 0.9, 0.4, 0.6]
    run = RunTables(write_run(tmp_path, "A", values, [False] * 4, {}), tmp_path / "scratch")
    import pyarrow as pa

    def sample(ids: list[str]) -> pa.Table:
        return pa.table({"record_id": ids, "copy": list(range(len(ids)))})

    run.use(sample(["r000", "r001", "r002", "r003"]))
    first = judged_table(run.con, "h", [])
    assert judged_table(run.con, "h", []) is first  # shared within one resample
    run.use(sample(["r001"] * 1 + ["r003"]))
    second = judged_table(run.con, "h", [])
    assert second.column("value").to_pylist() == [0.9, 0.6]
    # replacing the tables by hand, not through use(), changes the key as well
    run.con.execute("CREATE OR REPLACE TABLE judgments AS SELECT * FROM judgments LIMIT 1")
    run.con.execute("CREATE OR REPLACE TABLE records AS SELECT * FROM records LIMIT 1")
    assert judged_table(run.con, "h", []).num_rows == 1


def test_a_resample_that_keeps_the_tables_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    import evalkit.metrics._judged as judged

    run = RunTables(write_run(tmp_path, "A", [0.1, 0.9], [False, False], {}), tmp_path / "s")
    run.use(pa.table({"record_id": ["r000", "r001"], "copy": [0, 0]}))
    # tables refilled in place would keep their catalog versions, and so the cache's key
    monkeypatch.setattr(judged, "table_versions", lambda con: (("records", "table", 1),))
    with pytest.raises(RuntimeError, match="kept the tables"):
        run.use(pa.table({"record_id": ["r001"], "copy": [0]}))


def test_a_metric_undefined_on_many_resamples_gets_no_interval(tmp_path: Path) -> None:
    # slice model=b holds two included records of six: a resample draws neither of them
    # (4/6)^6 = 9% of the time (one record alone gets no interval, for another reason)
    values = [0.1, 0.9, 0.4, 0.6, 0.3, 0.2]
    excluded = [False, False, False, False, False, True]
    metrics = {"m": {"plugin": "mean", "judge": "h", "raw": False, "slice_by": ["model"]}}
    a = write_run(tmp_path, "A", values, excluded, metrics)
    b = write_run(tmp_path, "B", [v + 0.1 for v in values], excluded, metrics)
    rows = compare(a, b, n_boot=100)
    only_b = row_of(rows, "m", "model=b")
    assert only_b["ci_low"] is None and only_b["significant"] is None
    assert only_b["note"].startswith("not resampled: undefined on ")
    assert row_of(rows, "m")["ci_low"] is not None
    out = run_cli("compare", str(a), str(b), "--n-boot", "50", cwd=tmp_path).stdout
    assert "not resampled" in out


def test_a_metric_that_fails_on_a_resample_says_so(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.metrics.mean import MeanMetric

    metrics = {"m": {"plugin": "mean", "judge": "h", "raw": False},
               "r": {"plugin": "rate", "judge": "h", "threshold": 0.5, "raw": False}}
    a = write_run(tmp_path, "A", [0.1, 0.9, 0.4, 0.6], [False] * 4, metrics)
    b = write_run(tmp_path, "B", [0.2, 0.8, 0.5, 0.7], [False] * 4, metrics)
    calls = {"n": 0}
    compute = MeanMetric.compute

    def flaky(self, con):  # fine on the runs themselves (calls 1, 2), fails on resamples
        calls["n"] += 1  # (one call per resample, or one per block of stacked resamples)
        if calls["n"] == 3:
            raise ValueError("cannot split a resample\nsecond line")
        return compute(self, con)

    monkeypatch.setattr(MeanMetric, "compute", flaky)
    rows = compare(a, b, n_boot=20)
    m, r = row_of(rows, "m"), row_of(rows, "r")
    assert m["ci_low"] is None and m["delta"] == pytest.approx(0.05)
    assert m["note"] == ("not resampled: metric 'm' failed on a resample (ValueError: cannot "
                         "split a resample); no interval")
    assert r["ci_low"] is not None and r["note"] is None
