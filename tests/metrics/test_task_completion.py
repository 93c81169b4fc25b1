"""task_completion: outcomes from a column, a judge, a threshold; unusable outcomes."""

from __future__ import annotations

import pytest

from evalkit.metrics.task_completion import OutcomeConfig, TaskCompletionMetric
from tests.metrics.run_tables import by_metric, connect


def run(con, **kw):
    cfg = OutcomeConfig(**{"n_boot": 200, **kw})
    cfg.validate()
    return TaskCompletionMetric("done", cfg, None).compute(con)


def test_outcome_column_hand_computed():
    con = connect([{"record_id": "1", "outcome": "success"},
                   {"record_id": "2", "outcome": "failure"},
                   {"record_id": "3", "outcome": "Success"},
                   {"record_id": "4", "outcome": None},
                   {"record_id": "5", "outcome": "pending"},
                   {"record_id": "6", "outcome": "success", "excluded_by": "f"}])
    row = by_metric(run(con))["done"]
    assert row["value"] == pytest.approx(2 / 3)
    assert (row["n_attempted"], row["n_excluded"], row["n_judged"], row["n_unscored"]) == \
        (6, 1, 3, 2)
    assert row["details"]["n_success"] == 2 and row["details"]["n_failure"] == 1
    assert set(row["details"]["unscored_reasons"]) == {
        "record column 'outcome' missing",
        "record column 'outcome' 'pending' is not in the map and not a number "
        "(map: success, failure)"}
    assert 0 <= row["ci_low"] <= row["value"] <= row["ci_high"] <= 1


def test_outcome_from_a_state_check_style_judge():
    con = connect([{"record_id": str(i)} for i in range(4)],
                  [{"record_id": "0", "judge": "booked", "passed": True},
                   {"record_id": "1", "judge": "booked", "passed": False},
                   {"record_id": "2", "judge": "booked", "status": "error",
                    "error": "no such table"}])
    row = by_metric(run(con, outcome="judge:booked:passed"))["done"]
    assert row["value"] == 0.5 and row["n_judged"] == 2 and row["n_unscored"] == 2
    assert row["details"]["unscored_reasons"] == {"judgment status error": 1,
                                                  "no judgment from 'booked'": 1}


def test_numeric_outcomes_need_a_threshold():
    con = connect([{"record_id": str(i)} for i in range(3)],
                  [{"record_id": str(i), "judge": "g", "value": v}
                   for i, v in enumerate([0.9, 0.2, 0.6])])
    loose = by_metric(run(con, outcome="judge:g"))["done"]
    assert loose["n_judged"] == 0 and loose["value"] is None  # 0.9 is not success or failure
    row = by_metric(run(con, outcome="judge:g", threshold=0.5))["done"]
    assert row["value"] == pytest.approx(2 / 3)


def test_unknown_judge_empty_and_single_record():
    row = by_metric(run(connect([{"record_id": "1"}]), outcome="judge:ghost"))["done"]
    assert row["value"] is None
    assert "no judgments from judge 'ghost'" in row["details"]["undefined"]
    assert by_metric(run(connect([])))["done"]["value"] is None
    one = by_metric(run(connect([{"record_id": "1", "outcome": "success"}])))["done"]
    # one success of one: Wilson's interval, not a point
    assert one["value"] == 1.0 and one["ci_low"] == pytest.approx(0.2065, abs=1e-4)
    assert one["ci_high"] == 1.0


def test_slices():
    con = connect([{"record_id": str(i), "outcome": "success" if i < 3 else "failure",
                    "model": "ab"[i % 2]} for i in range(6)])
    rows = run(con, slice_by=["model"])
    assert by_metric(rows, "model=a")["done"]["value"] == pytest.approx(2 / 3)
    assert by_metric(rows, "model=b")["done"]["value"] == pytest.approx(1 / 3)


def test_config_errors():
    with pytest.raises(ValueError, match="outcome"):
        OutcomeConfig(outcome="nonsense").validate()
