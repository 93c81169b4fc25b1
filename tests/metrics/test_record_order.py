"""The bootstraps that resample records by position (a record's repeats together, a judge's
length slope) give the same interval whatever the records' order and ids: a merge of shards,
a shuffled input or renamed records hold the same data (as
``test_interval_methods.test_intervals_are_a_function_of_the_data_not_of_its_order`` checks
for the other metrics)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evalkit.metrics.judge_bias import JudgeBiasConfig, JudgeBiasMetric
from evalkit.metrics.repeatability import RepeatabilityConfig, RepeatabilityMetric
from tests.metrics.run_tables import connect
from tests.metrics.test_interval_methods import _shuffled_and_renamed

_RNG = np.random.default_rng(4)
RECORDS = [{"record_id": f"r{i:03d}", "model": ["gpt-4o", "llama-3"][i % 2],
            "output_tokens": int(_RNG.integers(10, 300))} for i in range(30)]
REPEATS = [{"record_id": f"r{i:03d}", "judge": "G", "value": v, "passed": v < 0.5,
            "judge_model": "openai/gpt-4.1"}
           for i in range(30) for v in _RNG.random(3).round(3).tolist()]


def _rows(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(r["metric"], r["slice"]): (r["value"], r["ci_low"], r["ci_high"],
                                        r["n_attempted"], r["n_judged"]) for r in rows}


def _repeatability(records: list[dict[str, Any]], judgments: list[dict[str, Any]]
                   ) -> dict[tuple[str, str], tuple[Any, ...]]:
    return _rows(RepeatabilityMetric("rep", RepeatabilityConfig(
        judge="G", threshold=0.5, n_boot=200, slice_by=["model"]), None).compute(
            connect(records, judgments)))


def _judge_bias(records: list[dict[str, Any]], judgments: list[dict[str, Any]]
                ) -> dict[tuple[str, str], tuple[Any, ...]]:
    return _rows(JudgeBiasMetric("jb", JudgeBiasConfig(judge="G", n_boot=200,
                                                       slice_by=["model"]),
                                 None).compute(connect(records, judgments)))


@pytest.mark.parametrize("seed", [1, 2])
def test_repeatability_is_a_function_of_the_repeats_not_of_ids_or_order(seed):
    clean = _repeatability(RECORDS, REPEATS)
    assert clean[("rep.spread", "all")][1] is not None
    assert _repeatability(*_shuffled_and_renamed(RECORDS, REPEATS, seed)) == clean


@pytest.mark.parametrize("seed", [1, 2])
def test_judge_bias_is_a_function_of_the_judgments_not_of_ids_or_order(seed):
    once = REPEATS[::3]
    clean = _judge_bias(RECORDS, once)
    assert clean[("jb.length_slope", "all")][1] is not None
    assert _judge_bias(*_shuffled_and_renamed(RECORDS, once, seed)) == clean


def _rich_run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every record field a metric of ``test_edges.every_metric`` reads, with fractional
    costs, latencies and scores (whose sums round differently in another order)."""
    import json

    rng = np.random.default_rng(3)
    records = [{"record_id": f"r{i:03d}", "model": "ab"[i % 2],
                "latency_s": float(rng.lognormal()), "cost_usd": float(rng.random() / 100),
                "outcome": "success" if rng.random() < 0.6 else "failure",
                "human_label": str(int(rng.random() < 0.4)),
                "user_action": ["accepted", "edited", "bypassed"][i % 3],
                "output": f"answer [1] [2] {i}", "context": ["one", "two"],
                "metadata": json.dumps({
                    "tool_calls": [{"name": "sh", "ok": bool(rng.random() < 0.7)}],
                    "spans": [{"type": "llm", "name": "call", "error": bool(i % 5 == 0)}]}),
                "excluded_by": "pipeline_failure" if rng.random() < 0.15 else None}
               for i in range(60)]
    judgments = []
    for i in range(60):
        for judge in "AB":
            v = float(rng.random())
            claims = [{"supported": bool(rng.random() < 0.7)} for _ in range(3)]
            judgments.append({"record_id": f"r{i:03d}", "judge": judge, "value": v,
                              "passed": v < 0.5, "details": json.dumps({"claims": claims})})
    return records, judgments


@pytest.mark.parametrize("seed", [1, 2])
def test_every_metric_gives_the_same_bits_for_renamed_and_shuffled_records(seed):
    """Sums taken in record_id order rounded differently under other ids: citation
    precision's value and bounds, the cost per success and the Brier score moved in their
    last bits."""
    from tests.metrics.test_edges import every_metric

    def rows(recs: list[dict[str, Any]], juds: list[dict[str, Any]]) -> dict[Any, Any]:
        return {(r["metric"], r["slice"]): (r["value"], r["ci_low"], r["ci_high"],
                                            r["n_judged"])
                for r in every_metric(connect(recs, juds))}

    records, judgments = _rich_run()
    clean = rows(records, judgments)
    assert rows(*_shuffled_and_renamed(records, judgments, seed)) == clean
