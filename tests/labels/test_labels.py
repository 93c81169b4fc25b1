"""Labels as data: import (checked, whole or not at all), the labels view of evalkit query,
designed samples and the corrected metric over them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.errors import LabelError
from evalkit.labels import import_labels, read_labels
from evalkit.labels.sampling import draw_sample
from evalkit.metrics.corrected import CorrectedConfig, CorrectedMetric
from evalkit.results.query import connect, run_query
from evalkit.results.writer import run_connection
from tests.labels.conftest import LabelledRuns, write_run


@pytest.fixture
def runs(labelled_runs: LabelledRuns, tmp_path: Path) -> LabelledRuns:
    """A fresh copy of the labelled runs directory, for tests that write labels."""
    root = tmp_path / "runs"
    shutil.copytree(labelled_runs.root, root)
    return LabelledRuns(root, root / "exp" / "run1", labelled_runs.truth, labelled_runs.score)


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _corrected(runs: LabelledRuns, **cfg) -> dict[tuple[str, str], dict]:
    metric = CorrectedMetric("c", CorrectedConfig(judge="j", **cfg),
                             SimpleNamespace(runs_dir=runs.root, run_id="run1"))
    con = run_connection(runs.run_dir)
    try:
        rows = metric.compute(con)
    finally:
        con.close()
    return {(r["metric"], r["slice"]): r for r in rows}


def test_import_appends_and_evalkit_query_shows_the_labels(runs, tmp_path):
    path = _jsonl(tmp_path / "l.jsonl", [
        {"record_id": "r0001", "judge": "j", "value": 1, "labeler": "ann"},
        {"record_id": "r0002", "judge": "j", "value": 0, "labeler": "ann",
         "labelled_at": "2026-11-01T10:00:00Z"}])
    result = import_labels(path, runs.root)
    assert (result.appended, result.already_present) == (2, 0)
    con = connect(runs.root)
    cols, rows = run_query(con, "SELECT record_id, value, labeler, source, design "
                                "FROM labels ORDER BY record_id")
    assert rows == [("r0001", 1.0, "ann", "l.jsonl", None), ("r0002", 0.0, "ann", "l.jsonl", None)]
    again = import_labels(path, runs.root)  # the same labels again: nothing new
    assert (again.appended, again.already_present) == (0, 2)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"record_id": ["r0003"], "judge": ["j"], "value": [0.5],
                             "labeler": ["bob"]}), tmp_path / "l.parquet")
    assert import_labels(tmp_path / "l.parquet", runs.root).appended == 1


def test_import_refuses_each_bad_row_in_one_line_and_appends_nothing(runs, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [
        {"record_id": "r0001", "judge": "j", "value": 1, "labeler": "ann"},  # fine
        {"record_id": "nope", "judge": "j", "value": 1, "labeler": "ann"},
        {"record_id": "r0002", "judge": "k", "value": 1, "labeler": "ann"},
        {"record_id": "r0003", "judge": "j", "value": 1.5, "labeler": "ann"},
        {"record_id": "r0004", "judge": "j", "value": 1, "labeler": "ann", "colour": "x"},
        {"record_id": "r0005", "judge": "j", "value": 1},
        {"record_id": "r0001", "judge": "j", "value": 0, "labeler": "ann"},  # contradicts l.1
        {"record_id": "r0006", "judge": "j", "value": 1, "labeler": "ann",
         "design": "random", "inclusion_prob": 2},
    ])
    with pytest.raises(LabelError) as err:
        import_labels(path, runs.root)
    lines = str(err.value).splitlines()
    assert lines[0].startswith("label import: 7 row(s) refused, nothing imported")
    by_line = {int(line.split(":")[1]): line for line in lines[1:]}
    assert "in no finished run" in by_line[2]
    assert "judged nothing" in by_line[3] and "judges: ann, j" in by_line[3]
    assert "outside the judge's scale [0, 1]" in by_line[4]
    assert "unknown key(s) ['colour']" in by_line[5]
    assert "labeler is missing" in by_line[6]
    assert "conflicts with" in by_line[7] and "r0001" in by_line[7]
    assert "not in (0, 1]" in by_line[8]
    assert read_labels(runs.root).num_rows == 0


def test_a_label_contradicting_a_stored_one_is_refused(runs, tmp_path):
    import_labels(_jsonl(tmp_path / "a.jsonl", [
        {"record_id": "r0001", "judge": "j", "value": 1, "labeler": "ann"}]), runs.root)
    csv = tmp_path / "b.csv"
    csv.write_text("record_id,judge,value,labeler\nr0001,j,0,ann\nr0001,j,0,bob\n")
    with pytest.raises(LabelError, match=r"b.csv:2: conflicts with the stored label"):
        import_labels(csv, runs.root)


def _label_sample(runs: LabelledRuns, tmp_path: Path, design: str, budget: int, **kw):
    drawn = draw_sample(runs.run_dir, runs.root, "j", budget, design, seed=3, **kw)
    rows = [{"record_id": r, "judge": "j", "value": runs.truth[r], "labeler": "ann",
             "sample_id": s} for r, s in zip(drawn.table.column("record_id").to_pylist(),
                                            drawn.table.column("sample_id").to_pylist(),
                                            strict=True)]
    import_labels(_jsonl(tmp_path / f"{design}.jsonl", rows), runs.root)
    return drawn


def test_the_corrected_rate_of_a_random_sample_equals_ppi_py(runs, tmp_path):
    ppi_py = pytest.importorskip("ppi_py")
    drawn = _label_sample(runs, tmp_path, "random", 60)
    probs = drawn.table.column("inclusion_prob").to_pylist()
    assert drawn.population == 400 and probs == [60 / 400] * 60
    rows = _corrected(runs, threshold=0.5, confidence=0.9)
    labelled = set(drawn.table.column("record_id").to_pylist())
    flags = {r: float(s > 0.5) for r, s in runs.score.items()}
    y = np.array([runs.truth[r] for r in sorted(labelled)])
    f = np.array([flags[r] for r in sorted(labelled)])
    f_u = np.array([flags[r] for r in sorted(flags) if r not in labelled])
    row = rows[("c", "all")]
    details = row["details"]
    assert details["method"] == "ppi++" and details["n_labelled"] == 60
    assert details["N"] == 400 and 0 <= details["lambda"] <= 1
    assert row["value"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, f, f_u)[0]),
                                         abs=1e-9)
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.1)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low[0], high[0]), abs=1e-9)
    assert rows[("c.judge", "all")]["value"] == pytest.approx(np.mean(list(flags.values())))
    assert rows[("c.human", "all")]["value"] == pytest.approx(y.mean())
    rg = rows[("c.rogan_gladen", "all")]["details"]
    assert rg["method"] == "rogan_gladen" and rg["sensitivity"] > 0.5
    assert ("c", "model=a") not in rows  # no slice_by: the whole run only


@pytest.mark.parametrize("design,kw", [("stratified", {"threshold": 0.5}),
                                       ("stratified", {"by": "model"}), ("active", {})])
def test_unequal_probability_samples_give_the_ipw_estimate(runs, tmp_path, design, kw):
    drawn = _label_sample(runs, tmp_path, design, 80, **kw)
    probs = np.array(drawn.table.column("inclusion_prob").to_pylist())
    assert np.all((probs > 0) & (probs <= 1))
    if design == "stratified":
        strata = drawn.table.column("stratum").to_pylist()
        assert drawn.table.num_rows == 80 and len(set(strata)) == 2
        for s in set(strata):  # n_h / N_h in each stratum
            assert len({p for p, t in zip(probs, strata, strict=False) if t == s}) == 1
    rows = _corrected(runs, threshold=0.5)
    details = rows[("c", "all")]["details"]
    assert details["method"] == "ipw" and details["design"] == design
    truth = np.mean(list(runs.truth.values()))
    assert abs(rows[("c", "all")]["value"] - truth) < 0.1
    assert "simple random" in rows[("c.rogan_gladen", "all")]["details"]["undefined"]


def test_a_label_follows_its_record_only_where_the_output_is_the_same(runs, tmp_path):
    rows = [{"record_id": f"r{i:04d}", "judge": "j", "value": runs.truth[f"r{i:04d}"],
             "labeler": "ann", "design": "random", "inclusion_prob": 0.1, "run_id": "run1"}
            for i in range(0, 400, 10)]
    import_labels(_jsonl(tmp_path / "scoped.jsonl", rows), runs.root)
    assert _corrected(runs, threshold=0.5)[("c", "all")]["details"]["n_labelled"] == 40
    truth = np.array([runs.truth[r] for r in sorted(runs.truth)])
    score = np.array([runs.score[r] for r in sorted(runs.score)])
    # a rerun with the same outputs (another judge, say): the labels follow the records
    same = write_run(runs.root, "run2", truth, score, ["m"] * 400)
    # another system: other outputs, which these labels never judged
    changed = write_run(runs.root, "run3", truth, score, ["m"] * 400, system=" (v2)")
    for run_dir, n_labelled in ((same, 40), (changed, 0)):
        metric = CorrectedMetric("c", CorrectedConfig(judge="j", threshold=0.5),
                                 SimpleNamespace(runs_dir=runs.root, run_id=run_dir.name))
        con = run_connection(run_dir)
        try:
            other = {(r["metric"], r["slice"]): r for r in metric.compute(con)}
        finally:
            con.close()
        assert other[("c", "all")]["details"]["n_labelled"] == n_labelled
        assert (other[("c", "all")]["value"] is None) == (n_labelled == 0)
    bad = _jsonl(tmp_path / "bad.jsonl", [{**rows[0], "run_id": "run9"}])
    with pytest.raises(LabelError, match="run 'run9' holds no record 'r0000'"):
        import_labels(bad, runs.root)


def test_labels_not_drawn_at_random_validate_but_never_estimate(runs, tmp_path):
    import_labels(_jsonl(tmp_path / "queue.jsonl", [
        {"record_id": f"r{i:04d}", "judge": "j", "value": runs.truth[f"r{i:04d}"],
         "labeler": "ann"} for i in range(50)]), runs.root)
    rows = _corrected(runs, threshold=0.5)
    row = rows[("c", "all")]
    details = row["details"]
    assert row["value"] is None and "drawn at random" in details["undefined"]
    assert details["n_validation_labels"] == 50
    assert rows[("c.judge", "all")]["value"] is not None


def test_rogan_gladen_refuses_too_few_labels_in_a_class(runs, tmp_path):
    _label_sample(runs, tmp_path, "random", 12)
    rows = _corrected(runs, threshold=0.5, min_per_class=8)
    assert "too few labels" in rows[("c.rogan_gladen", "all")]["details"][
        "undefined"]
    assert rows[("c", "all")]["value"] is not None


def test_rogan_gladen_refuses_a_judge_not_shown_better_than_chance(runs, tmp_path):
    # a random sample whose human labels barely follow the judge's verdict: Youden's J is
    # above 0 on the counts but not significantly, so the correction (which divides by J)
    # is refused with the reason; PPI++ stays defined (lambda near 0: the labels alone)
    drawn = draw_sample(runs.run_dir, runs.root, "j", 60, "random", seed=3)
    ids = drawn.table.column("record_id").to_pylist()
    flags = [runs.score[r] > 0.5 for r in ids]
    y, seen = [], {True: 0, False: 0}
    for f in flags:  # humans flag 3 of 5 of what the judge flags, 2 of 5 of the rest
        y.append(float((seen[f] % 5 < 3) if f else (seen[f] % 5 < 2)))
        seen[f] += 1
    import_labels(_jsonl(tmp_path / "weak.jsonl", [
        {"record_id": r, "judge": "j", "value": v, "labeler": "ann", "sample_id": s}
        for r, v, s in zip(ids, y, drawn.table.column("sample_id").to_pylist(), strict=True)]),
        runs.root)
    rows = _corrected(runs, threshold=0.5, confidence=0.95)
    rg = rows[("c.rogan_gladen", "all")]
    assert rg["value"] is None and "no better than chance" in rg["details"]["undefined"]
    assert 0 < rg["details"]["sensitivity"] + rg["details"]["specificity"] - 1
    assert rows[("c", "all")]["value"] is not None


def test_declared_column_labels_and_the_cli(runs, capsys):
    from evalkit.cli import main

    with pytest.raises(SystemExit) as done:
        main(["label", "sample", str(runs.run_dir), "--judge", "j", "--budget", "40",
              "--runs-dir", str(runs.root)])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "drew 40 of 400 records" in out and "expected 95% half-width" in out
    with pytest.raises(SystemExit) as done:
        main(["label", "sample", str(runs.run_dir), "--judge", "nope", "--budget", "40",
              "--runs-dir", str(runs.root)])
    assert done.value.code == 2
    assert "judge 'nope' left no judgment" in capsys.readouterr().err
    # an active draw's unequal weights cost part of the budget: it says how much, and
    # plans the half-width on the effective size that is left (Kish's N^2 / sum(1/pi))
    with pytest.raises(SystemExit) as done:
        main(["label", "sample", str(runs.run_dir), "--judge", "j", "--budget", "40",
              "--design", "active", "--seed", "2", "--runs-dir", str(runs.root)])
    assert done.value.code == 0
    out = capsys.readouterr().out
    ess = float(out.split("effective sample size ")[1].split(" ")[0])
    assert 0.8 * 40 <= ess <= 40 and "active (tau 0." in out


def test_labels_a_source_carries_are_declared_census_or_validation(runs, capsys):
    from evalkit.cli import main

    for extra, who in ((["--score", "ann"], "langfuse"), (["--column", "human_label"], "col")):
        with pytest.raises(SystemExit) as done:
            main(["label", "import", "--from-run", str(runs.run_dir), *extra, "--judge", "j",
                  "--labeler", who, "--runs-dir", str(runs.root)])
        assert done.value.code == 0, capsys.readouterr().err
    con = connect(runs.root)
    _, rows = run_query(con, "SELECT source, design, count(*), sum(value) FROM labels "
                             "GROUP BY ALL ORDER BY source")
    truth = runs.truth
    # every record has the imported score: a census; a quarter lack human_label: validation
    assert rows == [("column:human_label", None, 300,
                     sum(v for k, v in truth.items() if int(k[1:]) % 4)),
                    ("score:ann", "census", 400, sum(truth.values()))]
    got = _corrected(runs, threshold=0.5)[("c", "all")]
    assert got["details"]["method"] == "census"
    assert got["value"] == got["ci_low"] == pytest.approx(np.mean(list(truth.values())))


@pytest.mark.parametrize("cfg", [{}, {"threshold": 0.5}, {"slice_by": ["model"]}])
def test_the_corrected_rows_do_not_depend_on_the_order_of_the_records(runs, tmp_path, cfg):
    """The records' file order (a shuffled input, a merge of shards) moved the corrected
    mean's value and bounds, and the judge's mean, in their last bits."""
    import pyarrow.parquet as pq

    from evalkit.results.writer import write_parquet

    _label_sample(runs, tmp_path, "random", 60)

    def rows() -> dict:
        return {k: (r["value"], r["ci_low"], r["ci_high"])
                for k, r in _corrected(runs, **cfg).items()}

    clean = rows()
    for seed, path in enumerate([runs.run_dir / "records.parquet",
                                 runs.run_dir / "judgments" / "part-00000.parquet"]):
        table = pq.read_table(path)
        write_parquet(table.take(np.random.default_rng(seed).permutation(table.num_rows)),
                      path)
    assert rows() == clean
