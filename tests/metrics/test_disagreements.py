"""disagreements: the share, and the review queue written into the run directory."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from evalkit.metrics.disagreements import DisagreementsConfig, DisagreementsMetric
from tests.metrics.run_tables import connect


def records_and_judgments():
    records = [{"record_id": f"r{i}", "model": "m", "input": f"q{i}", "output": f"a{i}",
                "context": [f"passage {i}", "second"], "human_label": str(i % 2)}
               for i in range(4)]
    a = [0.9, 0.2, 0.6, 0.1]
    b = [0.1, 0.3, 0.4, 0.1]
    judgments = [{"record_id": f"r{i}", "judge": j, "value": v, "label": f"{j}{i}",
                  "explanation": f"{j} says {v}"}
                 for j, vals in (("A", a), ("B", b)) for i, v in enumerate(vals)]
    return connect(records, judgments)


def run(tmp_path, **kw):
    cfg = DisagreementsConfig(**{"judge_a": "A", "judge_b": "B", "n_boot": 0, **kw})
    cfg.validate()
    metric = DisagreementsMetric("review", cfg, SimpleNamespace(run_dir=tmp_path / "run"))
    return metric.compute(records_and_judgments())


def test_threshold_rule_and_queue(tmp_path):
    rows = run(tmp_path)
    assert rows[0]["value"] == pytest.approx(0.5)  # r0 (0.9 vs 0.1) and r2 (0.6 vs 0.4)
    assert rows[0]["details"]["n_disagree"] == 2
    queue = pq.read_table(tmp_path / "run" / "review" / "review.parquet").to_pylist()
    assert [q["record_id"] for q in queue] == ["r0", "r2"]  # largest difference first
    first = queue[0]
    assert first["a_explanation"] == "A says 0.9" and first["b_label"] == "B0"
    assert first["input"] == "q0" and first["difference"] == pytest.approx(0.8)
    with open(tmp_path / "run" / "review" / "review.csv", newline="") as fh:
        rows_csv = list(csv.DictReader(fh))
    assert [r["record_id"] for r in rows_csv] == ["r0", "r2"]
    assert rows_csv[0]["context"] == "passage 0 ||| second"


def test_difference_rule_and_max_rows(tmp_path):
    rows = run(tmp_path, difference=0.15, max_rows=1)
    assert rows[0]["details"]["n_disagree"] == 2  # 0.8 and 0.2 exceed 0.15
    queue = pq.read_table(tmp_path / "run" / "review" / "review.parquet")
    assert queue.column("record_id").to_pylist() == ["r0"]


def test_no_disagreement_writes_an_empty_queue(tmp_path):
    rows = run(tmp_path, judge_b="A")
    assert rows[0]["value"] == 0.0
    assert pq.read_table(tmp_path / "run" / "review" / "review.parquet").num_rows == 0


def test_against_human_labels(tmp_path):
    rows = run(tmp_path, judge_b=None, human_label=True)
    # A >= .5 on r0, r2; labels 1 on r1, r3: all four disagree
    assert rows[0]["value"] == 1.0
    queue = pq.read_table(tmp_path / "run" / "review" / "review.parquet").to_pylist()
    assert queue[0]["b_judge"] == "human_label" and "b_explanation" not in queue[0]


def test_negative_difference_is_a_config_error():
    with pytest.raises(ValueError, match="difference"):
        DisagreementsConfig(judge_a="A", judge_b="B", difference=-1).validate()


def test_the_csv_queue_guards_formulas_unless_told_not_to(tmp_path):
    """Text a spreadsheet would run (docs/trust.md, "Text from data") gets a leading quote
    in the CSV queue; the Parquet queue keeps it as it is."""
    records = [{"record_id": "=HYPERLINK(\"http://x\")", "model": "@SUM(A1)",
                "input": "+1+1", "output": "-2", "context": ["=cmd|' /C calc'!A0"]}]
    judgments = [{"record_id": records[0]["record_id"], "judge": j, "value": v,
                  "explanation": "\tx"} for j, v in (("A", 0.9), ("B", 0.1))]
    for formulas, where in ((False, "guarded"), (True, "raw")):
        cfg = DisagreementsConfig(judge_a="A", judge_b="B", n_boot=0, csv_formulas=formulas)
        metric = DisagreementsMetric("q", cfg, SimpleNamespace(run_dir=tmp_path / where))
        metric.compute(connect(records, judgments))
        with open(tmp_path / where / "review" / "q.csv", newline="") as fh:
            (row,) = list(csv.DictReader(fh))
        cells = [row[k] for k in ("record_id", "model", "input", "output", "context",
                                  "a_explanation")]
        if formulas:
            assert cells == ['=HYPERLINK("http://x")', "@SUM(A1)", "+1+1", "-2",
                             "=cmd|' /C calc'!A0", "\tx"]
        else:
            assert cells == ['\'=HYPERLINK("http://x")', "'@SUM(A1)", "'+1+1", "-2",
                             "'=cmd|' /C calc'!A0", "'\tx"]
    queue = pq.read_table(tmp_path / "guarded" / "review" / "q.parquet").to_pylist()
    assert queue[0]["model"] == "@SUM(A1)"
