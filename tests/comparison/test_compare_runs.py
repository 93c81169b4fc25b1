"""compare_runs on run directories written the way the runner writes them, with known
answers: a regression the gate catches, a null change it passes, one row per quantity, the
records that flipped, and a judge's drift told apart from the system's change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from evalkit.comparison import GATE_EXIT, compare_runs, parse_gate
from evalkit.errors import EvalkitError
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import write_json, write_parquet

METRICS = {
    "flag_rate": {"plugin": "rate", "judge": "g", "slice_by": ["model"]},
    "pass_rate": {"plugin": "rate", "judge": "g", "count": "passed", "raw": False},
    "flag_rate_again": {"plugin": "rate", "judge": "g", "raw": False},
    "score": {"plugin": "mean", "judge": "g", "raw": False},
}


def write_run(runs_dir: Path, run_id: str, flagged, outputs=None, metrics=None,
              gates=None) -> Path:
    n = len(flagged)
    outputs = outputs or [f"answer {i}" for i in range(n)]
    run_dir = runs_dir / "exp" / run_id
    (run_dir / "judgments").mkdir(parents=True)
    ids = [f"r{i:03d}" for i in range(n)]
    write_parquet(conform([{"run_id": run_id, "record_id": r, "model": "ab"[i % 2],
                            "output": outputs[i]} for i, r in enumerate(ids)], RECORDS),
                  run_dir / "records.parquet")
    write_parquet(conform([{"run_id": run_id, "record_id": r, "judge": "g",
                            "value": float(f), "passed": not f, "status": "ok",
                            "origin": "computed"} for r, f in zip(ids, flagged, strict=True)],
                          JUDGMENTS), run_dir / "judgments" / "part-00000.parquet")
    config = {"metrics": metrics or METRICS, "flag_at": ">"}
    if gates is not None:
        config["gates"] = gates
    write_json({"run_id": run_id, "experiment": "exp", "status": "ok", "config": config},
               run_dir / "manifest.json")
    return run_dir


NEW = [i for i in range(1, 40) if i % 5][:15]


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """100 records; B flags 15 more than A (a known regression), and one fewer."""
    runs = tmp_path_factory.mktemp("runs")
    a = [i % 5 == 0 for i in range(100)]  # 20 flagged
    b = list(a)
    for i in NEW:
        b[i] = True  # 15 newly flagged
    b[0] = False  # one improved
    return write_run(runs, "A", a), write_run(runs, "B", b), runs


def by_key(rows):
    return {(r["metric"], r["slice"]): r for r in rows}


def test_a_known_regression_is_caught_by_the_gate_and_its_records_listed(regression):
    a, b, _ = regression
    result = compare_runs(a, b, n_boot=60, max_boot=60,
                          gates=[parse_gate("flag_rate:+0.02"), parse_gate("flag_rate:0")])
    row = by_key(result.rows)[("flag_rate", "all")]
    assert row["delta"] == pytest.approx(0.14)
    assert row["test"] == "mcnemar_exact" and row["n_pairs"] == 100
    # 15 flips the bad way, 1 the good way: exact two-sided binomial p
    from scipy.stats import binomtest
    assert row["p_value"] == pytest.approx(binomtest(15, 16, 0.5).pvalue)
    assert row["significant"] is True and row["verdict"].startswith("regression")
    assert [g["passed"] for g in result.gates] == [False, False]
    assert result.exit_code == GATE_EXIT
    assert result.gates[1]["test"] == "mcnemar_exact"
    flips = [f for f in result.flips if f["metric"] == "flag_rate"]
    assert sorted(f["record_id"] for f in flips if f["change"] == "regressed") == \
        [f"r{i:03d}" for i in NEW]
    assert [f["record_id"] for f in flips if f["change"] == "improved"] == ["r000"]


def test_one_row_per_quantity(regression):
    a, b, _ = regression
    rows = by_key(compare_runs(a, b, n_boot=60, max_boot=60).rows)
    assert rows[("flag_rate.raw", "all")]["role"] == "derived"
    assert rows[("flag_rate.filter_effect", "all")]["role"] == "derived"
    assert rows[("pass_rate", "all")]["derived"] == "1 − flag_rate"
    assert rows[("flag_rate_again", "all")]["derived"] == "the same quantity as flag_rate"
    for key in [("flag_rate.raw", "all"), ("pass_rate", "all")]:
        assert rows[key]["p_adjusted"] is None and rows[key]["significant"] is None
        assert rows[key]["verdict"].startswith("derived")
    # the mean of a 0/1 judge is its flag rate: found from the data, whatever the plugin
    assert rows[("score", "all")]["derived"] == "the same quantity as flag_rate"
    tested = [r for r in rows.values() if r["p_adjusted"] is not None]
    # flag_rate (all, model=a, model=b): the family Holm corrects over
    assert sorted((r["metric"], r["slice"]) for r in tested) == [
        ("flag_rate", "all"), ("flag_rate", "model=a"), ("flag_rate", "model=b")]
    holm = sorted(r["p_value"] for r in tested)
    assert min(r["p_adjusted"] for r in tested) == pytest.approx(3 * holm[0])


def test_a_null_change_passes_and_says_what_it_could_have_detected(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.random(120) < 0.3
    b = a.copy()
    swap = rng.choice(120, 10, replace=False)  # judge noise: 5 each way
    ups = [i for i in swap if not a[i]][:5]
    downs = [i for i in swap if a[i]][:5] or [int(np.flatnonzero(a)[0])]
    b[ups] = True
    b[downs] = False
    result = compare_runs(write_run(tmp_path, "A", list(a)), write_run(tmp_path, "B", list(b)),
                          n_boot=60, max_boot=60, gates=[parse_gate("flag_rate:+0.02")])
    row = by_key(result.rows)[("flag_rate", "all")]
    assert row["significant"] is False
    assert row["verdict"].startswith("no evidence of a change (smallest detectable: ±")
    assert 0 < row["mde"] < 1
    assert result.gates[0]["passed"] and result.exit_code == 0


def test_verdicts_of_paired_rates_do_not_depend_on_the_seed(regression):
    a, b, _ = regression
    verdicts = {(r["p_adjusted"], r["verdict"]) for seed in range(3) for r in
                compare_runs(a, b, n_boot=30, max_boot=30, seed=seed, only=["flag_rate"]).rows
                if r["metric"] == "flag_rate" and r["slice"] == "all"}
    assert len(verdicts) == 1


def test_a_borderline_bootstrap_verdict_gets_more_resamples(tmp_path):
    # score's paired change sits near the bar: 400 resamples cannot settle it
    a = [False] * 60
    b = [False] * 60
    for i in range(8):
        b[i] = True
    for i in range(8, 10):
        a[i] = True
    metrics = {"score": {"plugin": "mean", "judge": "g", "raw": False}}
    rows = compare_runs(write_run(tmp_path, "A", a, metrics=metrics),
                        write_run(tmp_path, "B", b, metrics=metrics), n_boot=25,
                        max_boot=200).rows
    row = by_key(rows)[("score", "all")]
    assert row["test"] == "paired_bootstrap"
    assert row["n_resamples"] > 25 or abs(row["p_value"] - 0.05) > 3 * row["mc_error"]


def test_judge_drift_is_told_apart_from_a_system_change(tmp_path):
    n = 80
    outputs_a = [f"answer {i}" for i in range(n)]
    outputs_b = list(outputs_a)
    for i in range(40, 80):
        outputs_b[i] = f"new answer {i}"  # the system changed half the outputs
    a = [False] * n
    b = [False] * n
    for i in range(0, 12):
        b[i] = True  # on unchanged outputs: only the judge can have moved these
    for i in range(40, 44):
        b[i] = True  # on changed outputs: the system's
    result = compare_runs(write_run(tmp_path, "A", a, outputs_a),
                          write_run(tmp_path, "B", b, outputs_b), n_boot=40, max_boot=40)
    row = by_key(result.rows)[("flag_rate", "all")]
    assert row["delta"] == pytest.approx(16 / 80)
    assert row["judge_delta"] == pytest.approx(12 / 80)
    assert row["system_delta"] == pytest.approx(4 / 80)
    assert row["judge_ci_low"] > 0 and row["n_same_output"] == 40
    flips = [f for f in result.flips if f["metric"] == "flag_rate"]
    assert sum(f["same_output"] for f in flips) == 12


def test_gate_errors(regression):
    a, b, _ = regression
    with pytest.raises(EvalkitError, match="no row 'nope'.*flag_rate"):
        compare_runs(a, b, n_boot=5, max_boot=5, gates=[parse_gate("nope:+0.1")])
    result = compare_runs(a, b, n_boot=5, max_boot=5, gates=[parse_gate("score:0.1")])
    assert not result.gates[0]["passed"] and "not checked" in result.gates[0]["verdict"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``evalkit ARGS`` in this process: (exit code, stdout, stderr)."""
    from evalkit.cli import main

    with pytest.raises(SystemExit) as ended:
        main(list(args))
    out = capsys.readouterr()
    return ended.value.code or 0, out.out, out.err


def test_cli_gate_exit_codes_and_flips(regression, capsys, monkeypatch):
    _, _, runs = regression
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli(capsys, "compare", "A", "B", "--n-boot", "10", "--max-boot", "10", "--gate",
                       "flag_rate:+0.02", "--runs-dir", str(runs))
    assert code == GATE_EXIT
    assert "gate flag_rate:+0.02: FAIL" in out and "Holm" in out
    code, out, _ = cli(capsys, "compare", "A", "B", "--n-boot", "10", "--max-boot", "10", "--gate",
                       "flag_rate:+0.5", "--runs-dir", str(runs))
    assert code == 0 and "pass: no evidence" in out
    code, out, _ = cli(capsys, "compare", "A", "B", "--n-boot", "5", "--flips", "--format",
                       "csv", "--runs-dir", str(runs))
    lines = out.splitlines()
    assert lines[0] == "metric,slice,record_id,a,b,change,same_output"
    assert sum("regressed" in x for x in lines) == 15
    code, _, err = cli(capsys, "compare", "A", "B", "--gate", "flag_rate", "--runs-dir",
                       str(runs))
    assert code == 2 and "METRIC[@SLICE]:[+|-]TOLERANCE" in err


def test_gates_from_the_candidates_config(tmp_path, capsys):
    runs = tmp_path / "runs"
    metrics = {"flag_rate": {"plugin": "rate", "judge": "g", "raw": False}}
    write_run(runs, "A", [i % 5 == 0 for i in range(60)], metrics=metrics)
    write_run(runs, "B", [i % 2 == 0 for i in range(60)], metrics=metrics,
              gates=[{"metric": "flag_rate", "tolerance": 0.05}])
    code, out, _ = cli(capsys, "compare", "A", "B", "--n-boot", "10", "--max-boot", "10",
                       "--runs-dir", str(runs))
    assert code == GATE_EXIT and "gate flag_rate:+0.05: FAIL" in out


def test_a_changed_judge_is_named(tmp_path):
    import pyarrow.parquet as pq

    from evalkit.results.writer import write_parquet as write

    metrics = {"flag_rate": {"plugin": "rate", "judge": "g", "raw": False}}
    runs = []
    for run_id, model in (("A", "openai/gpt-4o"), ("B", "openai/gpt-5")):
        run = write_run(tmp_path, run_id, [i % 3 == 0 for i in range(30)], metrics=metrics)
        part = run / "judgments" / "part-00000.parquet"
        table = pq.read_table(part)
        produced = f'{{"model": "{model}", "prompt_sha256": "abc"}}'
        write(table.set_column(table.schema.get_field_index("produced_by"), "produced_by",
                               pa.array([produced] * table.num_rows)), part)
        runs.append(run)
    result = compare_runs(*runs, n_boot=5, max_boot=5)
    assert result.judge_changes == [{"judge": "g", "field": "model", "a": "openai/gpt-4o",
                                     "b": "openai/gpt-5"}]


def test_a_change_on_a_few_records_is_never_more_certain_than_an_exact_test_allows(tmp_path):
    """One shared record gave the mean "decrease (p = 0)"; six records that all moved the
    same way gave p = 0 (every resample moved that way). No distribution-free paired test
    of n records can go below Fisher's randomization test, exact over the 2ⁿ sign flips:
    2·2⁻ⁿ there (scipy.stats.permutation_test)."""
    from scipy import stats

    score = {"score": {"plugin": "mean", "judge": "g", "raw": False}}
    one = compare_runs(write_run(tmp_path / "one", "A", [True], metrics=score),
                       write_run(tmp_path / "one", "B", [False], metrics=score), n_boot=200)
    (row,) = one.rows
    assert row["p_value"] is None and row["significant"] is None and row["ci_low"] is None
    assert "1 record" in row["note"] and "decrease" not in row["verdict"]

    a, b = [False] * 6, [True] * 6
    six = compare_runs(write_run(tmp_path / "six", "A", a, metrics=score),
                       write_run(tmp_path / "six", "B", b, metrics=score), n_boot=400)
    (row,) = six.rows
    exact = stats.permutation_test((np.array(b, float), np.array(a, float)),
                                   lambda x, y: np.mean(x - y), permutation_type="samples",
                                   n_resamples=np.inf).pvalue
    assert exact == pytest.approx(2 / 64)
    assert row["test"] == "paired_bootstrap" and row["p_value"] == pytest.approx(exact)
    assert row["significant"]  # 1/32 < 0.05: six records that all moved are evidence


def test_a_change_beyond_the_float_range_is_no_number(tmp_path):
    """Means of -1.5e308 and 1.5e308 are finite; their difference is not (it printed inf)."""
    import pyarrow.parquet as pq

    score = {"score": {"plugin": "mean", "judge": "g", "raw": False}}
    a = write_run(tmp_path, "A", [True] * 4, metrics=score)
    b = write_run(tmp_path, "B", [True] * 4, metrics=score)
    for run, value in ((a, -1.5e308), (b, 1.5e308)):
        path = run / "judgments" / "part-00000.parquet"
        table = pq.read_table(path)
        table = table.set_column(table.schema.get_field_index("value"), "value",
                                 pa.array([value] * table.num_rows, pa.float64()))
        write_parquet(table, path)
    (row,) = compare_runs(a, b, n_boot=50).rows
    for key in ("delta", "ci_low", "ci_high", "p_value", "mde", "judge_delta",
                "judge_ci_low", "system_delta", "system_ci_high"):
        assert row[key] is None or np.isfinite(row[key]), key
    assert row["delta"] is None and "float range" in row["note"]
