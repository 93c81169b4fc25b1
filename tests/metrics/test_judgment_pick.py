"""A record a judge scored more than once (a rerun, an imported and a computed copy) counts
once, with the same judgment whatever order the copies were written in: the metric rows of
a run, and so their intervals, are a function of its rows, not of the order a source, a
merge of shards or a resume wrote them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from evalkit.metrics._judged import JudgeMetricConfig
from evalkit.metrics._rater_pairs import PairConfig
from evalkit.metrics.agreement import AgreementMetric
from evalkit.metrics.mean import MeanMetric
from evalkit.metrics.rate import RateConfig, RateMetric
from tests.metrics.run_tables import connect

RECORDS = [{"record_id": f"r{i}"} for i in range(8)]
BASE = [{"record_id": f"r{i}", "judge": judge, "value": round(0.11 * i + 0.05 * k, 2),
         "passed": (i + k) % 3 != 0}
        for i in range(1, 8) for k, judge in enumerate("AB")]
COPIES = [  # r0 judged twice by A with different ok verdicts, errored twice by B
    {"record_id": "r0", "judge": "A", "value": 0.9, "passed": False, "origin": "imported"},
    {"record_id": "r0", "judge": "A", "value": 0.1, "passed": True},
    {"record_id": "r0", "judge": "B", "status": "error", "error": "TimeoutError"},
    {"record_id": "r0", "judge": "B", "status": "error", "error": "ValueError: no JSON"},
]


def _rows(judgments: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    con = connect(RECORDS, judgments)
    rows = MeanMetric("m", JudgeMetricConfig(judge="A", n_boot=100), None).compute(con)
    rows += RateMetric("r", RateConfig(judge="A", n_boot=100), None).compute(con)
    rows += AgreementMetric("ag", PairConfig(judge_a="A", judge_b="B", n_boot=100),
                            None).compute(con)
    return [(r["metric"], r["slice"], r["value"], r["ci_low"], r["ci_high"],
             r["n_judged"], r["n_unscored"], repr(sorted(r["details"].items())))
            for r in rows]


@pytest.mark.parametrize("order", list(itertools.permutations(range(4)))[::5])
def test_the_judgment_picked_for_a_record_does_not_depend_on_the_order_written(order):
    copies = [COPIES[i] for i in order]
    first = _rows([*COPIES, *BASE])
    assert _rows([*copies, *BASE]) == first
    assert _rows([*BASE, *copies]) == first
    assert _rows([*reversed(BASE), *copies]) == first


def _bias_rows(records: list[dict[str, Any]], judgments: list[dict[str, Any]]
               ) -> list[tuple[Any, ...]]:
    from evalkit.metrics.judge_bias import JudgeBiasConfig, JudgeBiasMetric

    rows = JudgeBiasMetric("jb", JudgeBiasConfig(judge="J", n_boot=200, slice_by=["model"]),
                           None).compute(connect(records, judgments))
    return sorted((r["metric"], r["slice"], r["value"], r["ci_low"], r["ci_high"],
                   r["n_attempted"], r["n_judged"]) for r in rows)


def test_judge_bias_intervals_do_not_depend_on_the_order_of_the_records():
    """Its bootstraps resampled rows in the order the join returned them."""
    records = [{"record_id": f"r{i:02d}", "model": ["gpt-4o", "llama-3"][i % 2],
                "output_tokens": 40 + 17 * i % 90} for i in range(24)]
    judgments = [{"record_id": f"r{i:02d}", "judge": "J", "judge_model": "openai/gpt-4.1",
                  "value": (i * 7 % 10) / 10} for i in range(24)]
    first = _bias_rows(records, judgments)
    assert any(r[3] is not None for r in first)
    for k in (5, 11):
        turned = records[k:] + records[:k]
        assert _bias_rows(turned[::-1], judgments[k:] + judgments[:k]) == first


def test_judge_bias_counts_every_record_once():
    """Records the judge never scored were not attempted (an inner join dropped them) and a
    record judged twice was attempted twice."""
    records = [{"record_id": f"r{i:02d}", "model": "llama-3", "output_tokens": 10 * i}
               for i in range(10)]
    judgments = [{"record_id": f"r{i:02d}", "judge": "J", "judge_model": "gpt-4.1",
                  "value": i / 10} for i in range(6)]
    judgments.append({**judgments[2], "value": 0.9, "origin": "imported"})
    from evalkit.metrics.judge_bias import JudgeBiasConfig, JudgeBiasMetric

    rows = JudgeBiasMetric("jb", JudgeBiasConfig(judge="J", n_boot=50), None).compute(
        connect(records, judgments))
    for r in rows:
        assert (r["n_attempted"], r["n_excluded"], r["n_judged"], r["n_unscored"]) == (
            10, 0, 6, 4), r["metric"]
    slope = next(r for r in rows if r["metric"] == "jb.length_slope")
    assert slope["value"] == pytest.approx(0.1 / 10 * 100)  # the computed copy of r02
