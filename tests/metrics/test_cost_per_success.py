"""cost_per_success: every attempt's cost over successes; undefined cases and open bounds."""

from __future__ import annotations

import pytest

from evalkit.metrics.cost_per_success import CostPerSuccessConfig, CostPerSuccessMetric
from tests.metrics.run_tables import by_metric, connect


def run(con, **kw):
    cfg = CostPerSuccessConfig(**{"n_boot": 200, **kw})
    cfg.validate()
    return by_metric(CostPerSuccessMetric("cps", cfg, None).compute(con))["cps"]


RECORDS = [{"record_id": "1", "outcome": "success", "cost_usd": 0.02},
           {"record_id": "2", "outcome": "failure", "cost_usd": 0.03},
           {"record_id": "3", "outcome": "success", "cost_usd": 0.01},
           {"record_id": "4", "outcome": None, "cost_usd": 0.04, "excluded_by": "failed"}]


def test_failed_attempts_cost_money_too():
    row = run(connect(RECORDS))
    assert row["value"] == pytest.approx(0.10 / 2)
    assert row["details"]["n_success"] == 2
    # 4 records and 2 successes: 6% of the resamples hold no success, so no finite upper
    # bound (null, with the reason), never infinity
    assert row["ci_low"] <= row["value"] and row["ci_high"] is None
    assert "upper bound open" in row["details"]["ci_open"]
    only_included = run(connect(RECORDS), include_excluded_cost=False)
    assert only_included["value"] == pytest.approx(0.06 / 2)


def test_judge_cost_is_added_when_asked():
    judgments = [{"record_id": "1", "judge": "llm", "cost_usd": 0.5},
                 {"record_id": "2", "judge": "other", "cost_usd": 0.25},
                 {"record_id": "3", "judge": "llm", "cost_usd": 1.0, "origin": "imported"}]
    assert run(connect(RECORDS, judgments), judge_cost=True)["value"] == \
        pytest.approx((0.10 + 0.75) / 2)
    assert run(connect(RECORDS, judgments), judge_cost=True, judges=["llm"])["value"] == \
        pytest.approx((0.10 + 0.5) / 2)


def test_no_success_is_undefined_with_the_reason_neither_zero_nor_infinite():
    failed = [{"record_id": "1", "outcome": "failure", "cost_usd": 0.2},
              {"record_id": "2", "outcome": "failure", "cost_usd": 0.1}]
    row = run(connect(failed))
    assert row["value"] is None and row["ci_low"] is None and row["ci_high"] is None
    assert "no successful outcome" in row["details"]["undefined"]
    assert row["details"]["total_cost"] == pytest.approx(0.3)
    free = [{"record_id": "1", "outcome": "failure", "cost_usd": 0.0}]
    row = run(connect(free))
    assert row["value"] is None and "0/0" in row["details"]["undefined"]
    assert run(connect([]))["value"] is None


def test_missing_costs_make_a_lower_bound_and_an_unbounded_interval_is_open():
    records = [{"record_id": "1", "outcome": "success", "cost_usd": None},
               {"record_id": "2", "outcome": "failure", "cost_usd": 1.0}]
    row = run(connect(records))
    assert row["value"] == 1.0
    assert row["details"]["n_cost_missing"] == 1 and "lower bound" in row["details"]["note"]
    # resamples without the success: no finite upper bound, null with the reason
    assert row["ci_high"] is None and "upper bound open" in row["details"]["ci_open"]


def test_unknown_outcomes_are_unscored():
    records = [{"record_id": "1", "outcome": "success", "cost_usd": 1.0},
               {"record_id": "2", "outcome": "maybe", "cost_usd": 1.0}]
    row = run(connect(records))
    assert row["n_unscored"] == 1 and row["n_judged"] == 1 and row["value"] == 2.0


@pytest.mark.parametrize("judge_cost", [False, True])
def test_no_known_cost_is_null_with_the_reason_not_zero(judge_cost):
    """Every record's cost unknown (null) is not a cost of 0: it printed 0 [0, 0]. Zero
    costs, known, stay 0."""
    records = [{"record_id": str(i), "outcome": "success" if i % 2 else "failure",
                "cost_usd": None} for i in range(4)]
    row = run(connect(records), judge_cost=judge_cost)
    assert row["value"] is None and row["ci_low"] is None and row["ci_high"] is None
    assert "no record in this slice has a cost" in row["details"]["undefined"]
    assert row["n_attempted"] == row["n_excluded"] + row["n_judged"] + row["n_unscored"]
    known = run(connect([{**r, "cost_usd": 0.0} for r in records]))
    assert known["value"] == 0.0
