"""The judge_agreement experiment end to end, offline: bundled BEGIN sample, two token_overlap
judges, agreement with each other and with the human labels, a review queue."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end


def test_judge_agreement_runs_offline(tmp_path):
    run_cli("run", "+experiment=judge_agreement", "runner.summary=false", cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path, "judge_agreement")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["n_records"] == 300 and manifest["n_rejects"] == 0
    metrics = {(m["metric"], m["slice"]): m for m in
               pq.read_table(run_dir / "metrics.parquet").to_pylist()}
    slices = {s for _, s in metrics}
    assert slices == {"all", "model=gpt2", "model=t5", "model=ctrl", "model=doha"}
    for name in ("judges", "words_vs_human", "phrases_vs_human"):
        for stat in ("pearson", "spearman", "kappa", "alpha_interval", "alpha_nominal",
                     "percent_agreement"):
            row = metrics[(f"{name}.{stat}", "all")]
            assert row["n_judged"] == 300 and row["value"] is not None
            assert row["ci_low"] <= row["value"] <= row["ci_high"]
    # the proxies carry some signal on BEGIN: positive correlation with the annotators
    assert metrics[("words_vs_human.pearson", "all")]["ci_low"] > 0
    confusion = json.loads(metrics[("words_validation.f1", "all")]["details"])["confusion"]
    assert sum(confusion.values()) == 300
    queue = pq.read_table(run_dir / "review" / "disagreements.parquet")
    assert queue.num_rows == round(metrics[("disagreements", "all")]["value"] * 300)
    assert (run_dir / "review" / "disagreements.csv").is_file()


def test_judge_agreement_on_halueval(tmp_path):
    run_cli("run", "+experiment=judge_agreement", "runner.summary=false",
            "source.path=${evalkit.data:halueval_general.jsonl}",
            "+metrics.judges.n_boot=0", cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path, "judge_agreement")
    rows = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    n = {r["metric"]: r["value"] for r in rows if r["slice"] == "all"}
    assert n["judges.n"] == 300 and n["words_vs_human.n"] == 300


def test_judge_agreement_with_an_llm_judge_in_a_seat(tmp_path):
    """With a model configured (here the fake OpenAI-compatible server of the LLM judge
    tests), an LLM judge takes judge_b's seat through overrides alone."""
    from tests.judges.llm.fake_llm_server import FakeLLMServer

    server = FakeLLMServer().start()
    try:
        run_cli("run", "+experiment=judge_agreement", "runner.summary=false",
                "judges=[hallucination_llm]", f"judges.hallucination_llm.api_base={server.url}",
                "judges.hallucination_llm.model=openai/fake",
                "+judges.hallucination_llm.progress=false",
                "metrics.judges.judge_b=hallucination_llm", "+metrics.judges.n_boot=50",
                cwd=tmp_path)
    finally:
        server.stop()
    (run_dir,) = run_dirs(tmp_path, "judge_agreement")
    rows = {r["metric"]: r for r in pq.read_table(run_dir / "metrics.parquet").to_pylist()
            if r["slice"] == "all"}
    assert json.loads(rows["judges.kappa"]["details"])["b"] == "hallucination_llm"
    assert rows["judges.n"]["value"] == 300 and rows["judges.pearson"]["value"] is not None
