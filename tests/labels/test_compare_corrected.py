"""evalkit compare with labels in both runs: the change of the corrected rate by PPI++ on the
paired differences, beside the judge-only change, equal to ppi_py on those differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evalkit.comparison import compare_runs
from evalkit.labels import import_labels
from tests.labels.conftest import write_run

CONFIG = {"metrics": {"c": {"plugin": "corrected", "judge": "j", "threshold": 0.5}}}


def _runs(tmp_path: Path):
    rng = np.random.default_rng(32)
    n = 300
    truth_a = (rng.random(n) < 0.35).astype(float)
    truth_b = np.where(rng.random(n) < 0.25, 0.0, truth_a)  # system B fixes a quarter
    score = [np.clip(0.55 * t + rng.normal(0.25, 0.2, n), 0, 1).round(3)
             for t in (truth_a, truth_b)]
    root = tmp_path / "runs"
    dirs = [write_run(root, rid, t, s, ["m"] * n, CONFIG, system=f" from {rid}")
            for rid, t, s in (("runA", truth_a, score[0]), ("runB", truth_b, score[1]))]
    return root, dirs, (truth_a, truth_b), score


def _label(root: Path, tmp_path: Path, picked, truths, scoped: bool) -> None:
    rows = [{"record_id": f"r{i:04d}", "judge": "j", "value": float(truths[k][i]),
             "labeler": f"ann{k}", "design": "random", "inclusion_prob": len(picked) / 300,
             **({"run_id": run} if scoped else {})}
            for k, run in enumerate(("runA", "runB")) for i in picked]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_labels(path, root)


def test_compare_estimates_the_corrected_difference_by_paired_ppi(tmp_path, capsys):
    ppi_py = pytest.importorskip("ppi_py")
    root, (run_a, run_b), truths, score = _runs(tmp_path)
    picked = sorted(np.random.default_rng(5).choice(300, 60, replace=False).tolist())
    _label(root, tmp_path, picked, truths, scoped=True)
    result = compare_runs(run_a, run_b, n_boot=0)
    (row,) = result.corrected
    f_a, f_b = (score[0] > 0.5).astype(float), (score[1] > 0.5).astype(float)
    mask = np.zeros(300, dtype=bool)
    mask[picked] = True
    d_y, d_f = (truths[1] - truths[0])[mask], f_b - f_a
    low, high = ppi_py.ppi_mean_ci(d_y, d_f[mask], d_f[~mask], alpha=0.05)
    assert row["value"] == pytest.approx(
        float(ppi_py.ppi_mean_pointestimate(d_y, d_f[mask], d_f[~mask])[0]), abs=1e-9)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low[0], high[0]), abs=1e-9)
    assert row["n_labelled"] == 60 and row["judge_delta"] == pytest.approx(d_f.mean())
    assert row["human_delta"] == pytest.approx(d_y.mean())

    from evalkit.cli import main

    with pytest.raises(SystemExit):
        main(["compare", str(run_a), str(run_b), "--n-boot", "0", "--runs-dir", str(root)])
    out = capsys.readouterr().out
    assert "c: B − A corrected" in out and "60 records labelled in both of 300" in out


def test_labels_that_do_not_name_their_run_cannot_pair_different_outputs(tmp_path):
    root, (run_a, run_b), truths, _ = _runs(tmp_path)
    picked = list(range(0, 300, 5))
    rows = [{"record_id": f"r{i:04d}", "judge": "j", "value": float(truths[0][i]),
             "labeler": "ann", "design": "random", "inclusion_prob": 0.2} for i in picked]
    path = tmp_path / "unscoped.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    import_labels(path, root)
    (row,) = compare_runs(run_a, run_b, n_boot=0).corrected
    assert row["value"] is None and row["n_ambiguous_labels"] == 60
    assert "do not say which run's output" in row["undefined"]


def test_the_report_of_two_runs_lists_the_corrected_change(tmp_path):
    from evalkit.report import _verdicts
    from evalkit.report._data import Limits, load_run

    root, (run_a, run_b), truths, _ = _runs(tmp_path)
    picked = sorted(np.random.default_rng(5).choice(300, 60, replace=False).tolist())
    _label(root, tmp_path, picked, truths, scoped=True)
    runs = [load_run(d, Limits(max_records=5)) for d in (run_a, run_b)]
    verdicts, _ = _verdicts(runs, n_boot=2)
    (row,) = [v for v in verdicts if v["metric"] == "c (corrected, paired PPI++)"]
    expected = compare_runs(run_a, run_b, n_boot=0).corrected[0]
    assert row["delta"] == pytest.approx(expected["value"])
    assert row["verdict"].startswith("60 labelled pairs; judge alone")


def test_the_judge_and_label_only_changes_have_the_paired_t_interval_as_scipy(tmp_path):
    """The labels-alone and judge-alone changes are means of paired differences: their
    interval is Student's (scipy.stats.ttest_rel's), not the normal one, which at 8
    labelled records was 17% too narrow."""
    from scipy import stats

    root, (run_a, run_b), truths, score = _runs(tmp_path)
    picked = [0, 3, 10, 29, 40, 50, 77, 200]
    _label(root, tmp_path, picked, truths, scoped=True)
    (row,) = compare_runs(run_a, run_b, n_boot=0).corrected
    f_a, f_b = (score[0] > 0.5).astype(float), (score[1] > 0.5).astype(float)
    y_a, y_b = truths[0][picked], truths[1][picked]
    assert np.std(y_b - y_a) > 0  # the labels changed: an interval with a width
    for prefix, (b, a) in (("human", (y_b, y_a)), ("judge", (f_b, f_a))):
        ci = stats.ttest_rel(b, a).confidence_interval(0.95)
        assert (row[f"{prefix}_ci_low"], row[f"{prefix}_ci_high"]) == pytest.approx(
            (ci.low, ci.high), rel=1e-9), prefix
