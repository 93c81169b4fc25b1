"""``judge_bias`` on constructed judgments with known answers: a known length slope, a
length-controlled score, self-preference for the judge's own model family, and a pairwise
judge's position-swap consistency and first-position preference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalkit.metrics.judge_bias import JudgeBiasConfig, JudgeBiasMetric, model_family
from evalkit.results.schemas import JUDGMENTS, RECORDS, conform
from evalkit.results.writer import run_connection, write_parquet


def write(run_dir: Path, records: list[dict], judgments: list[dict]) -> Path:
    (run_dir / "judgments").mkdir(parents=True)
    ids = [f"r{i:03d}" for i in range(len(records))]
    write_parquet(conform([{"run_id": "x", "record_id": r, **rec}
                           for r, rec in zip(ids, records, strict=True)], RECORDS),
                  run_dir / "records.parquet")
    write_parquet(conform([{"run_id": "x", "record_id": r, "judge": "g", "status": "ok",
                            **j} for r, j in zip(ids, judgments, strict=True)], JUDGMENTS),
                  run_dir / "judgments" / "part-00000.parquet")
    return run_dir


def rows_of(run_dir: Path, **config) -> dict:
    metric = JudgeBiasMetric("b", JudgeBiasConfig(judge="g", n_boot=300, **config), None)
    return {(r["metric"], r["slice"]): r for r in metric.compute(run_connection(run_dir))}


def test_model_families():
    assert model_family("openai/gpt-4o-mini") == model_family("gpt-4.1") == "gpt"
    assert model_family("anthropic/claude-3-5-haiku") == "claude"
    assert model_family(None) is None


def test_a_known_length_slope_and_a_length_controlled_score(tmp_path):
    rng = np.random.default_rng(0)
    tokens = rng.integers(50, 650, 120)
    model = np.where(np.arange(120) < 60, "long", "short")
    tokens[model == "long"] += 300  # one model writes longer outputs
    noise = rng.normal(0, 0.02, 120)
    values = 0.2 + 0.1 * tokens / 100 + noise  # 0.1 per 100 tokens, whatever the model
    run = write(tmp_path / "run", [{"output_tokens": int(t), "model": m}
                                   for t, m in zip(tokens, model, strict=True)],
                [{"value": float(v), "judge_model": "openai/gpt-4o"} for v in values])
    rows = rows_of(run, slice_by=["model"])
    slope = rows[("b.length_slope", "all")]
    assert slope["value"] == pytest.approx(0.1, abs=0.005)
    assert slope["ci_low"] < 0.1 < slope["ci_high"]
    # the raw means differ by 0.3 (the length gap); at one length, the models score alike
    long_, short = rows[("b.length_controlled", "model=long")], \
        rows[("b.length_controlled", "model=short")]
    assert abs(long_["value"] - short["value"]) < 0.02
    assert values[model == "long"].mean() - values[model == "short"].mean() > 0.25
    assert rows[("b.self_preference", "judge_family=gpt")]["value"] is None


def test_self_preference_for_the_judges_own_family(tmp_path):
    models = ["gpt-4o-mini", "claude-3-5-haiku"] * 30
    values = [0.8 if m.startswith("gpt") else 0.5 for m in models]
    run = write(tmp_path / "run", [{"model": m, "output_tokens": 100} for m in models],
                [{"value": v, "judge_model": "openai/gpt-4o"} for v in values])
    row = rows_of(run)[("b.self_preference", "judge_family=gpt")]
    assert row["value"] == pytest.approx(0.3)
    assert row["details"]["n_own"] == 30


def test_position_swap_consistency_and_first_position_preference(tmp_path):
    # 10 records: 6 consistent; 4 where the first slot won both calls
    details = [{"orders_agree": True, "candidate_first": {"winner": "candidate"},
                "baseline_first": {"winner": "candidate"}}] * 6 + \
        [{"orders_agree": False, "candidate_first": {"winner": "candidate"},
          "baseline_first": {"winner": "baseline"}}] * 4
    run = write(tmp_path / "run", [{"model": "m"}] * 10,
                [{"value": 1.0 if d["orders_agree"] else 0.5, "details": d}
                 for d in details])
    rows = rows_of(run)
    assert rows[("b.swap_consistency", "all")]["value"] == pytest.approx(0.6)
    # 20 decisive calls: consistent records give one first-slot win each (6), biased two (8)
    first = rows[("b.first_position", "all")]
    assert first["value"] == pytest.approx(14 / 20)
    assert first["ci_low"] <= 0.7 <= first["ci_high"]


def test_first_position_is_a_clustered_proportion_and_n_boot_0_turns_every_interval_off(
        tmp_path):
    """The share of decisive calls won by the first slot (two calls per record) resampled
    to [1, 1] when the first slot won every call, and to nothing, without a reason, at one
    record; it takes Wilson's interval at its effective size, as citation precision does.
    n_boot 0 still gave swap_consistency its Wilson interval."""
    from evalkit.metrics._intervals import clustered_proportion_ci

    details = {"orders_agree": False, "candidate_first": {"winner": "candidate"},
               "baseline_first": {"winner": "baseline"}}
    for n in (1, 8):
        run = write(tmp_path / str(n), [{"model": "m", "output_tokens": 5}] * n,
                    [{"value": 1.0, "details": details}] * n)
        first = rows_of(run)[("b.first_position", "all")]
        assert first["value"] == 1.0
        assert (first["ci_low"], first["ci_high"]) == pytest.approx(
            clustered_proportion_ci(np.full(n, 2.0), np.full(n, 2.0)))
        assert first["ci_low"] < 1.0 and first["details"]["ci_method"] == "wilson (effective n)"
    some = write(tmp_path / "some", [{"model": "gpt-4o", "output_tokens": 5 + 7 * i}
                                     for i in range(6)],
                 [{"value": i / 6, "details": details, "judge_model": "gpt-4.1"}
                  for i in range(6)])
    off = JudgeBiasMetric("b", JudgeBiasConfig(judge="g", n_boot=0), None)
    for row in off.compute(run_connection(some)):
        assert row["ci_low"] is None and row["ci_high"] is None, row["metric"]
        assert "ci_open" not in row["details"] and "ci_method" not in row["details"]
