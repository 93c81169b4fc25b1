"""`evalkit init FILE` on logs shaped like real exports: it finds the output text, the prompt,
the model, the id, latency (in seconds), cost, tokens, the reference, the failure status and
user actions at any depth; a run of what it wrote, with no hand edit, gives correct numbers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import evalkit
from evalkit.commands import init
from evalkit.commands.init_mapping import propose, sample_rows
from evalkit.errors import ConfigError
from tests.commands.log_shapes import (
    MODELS,
    MORE_SHAPES,
    N_FAILED,
    SHAPES,
    N,
    issue_chat_log,
    jsonl,
)
from tests.conftest import run_cli

# shape -> column -> the path init must find (None: must leave the column unmapped)
EXPECTED = {
    "issue_chat_log": {"record_id": "id", "input": "request.messages",
                       "output": "response.text", "model": "meta.model",
                       "level": "response.finish_reason", "latency_s": "meta.latency_ms",
                       "cost_usd": "meta.cost_usd", "user_action": "meta.user_edited",
                       "reference": None},
    "openai": {"record_id": "request_id", "input": "request.messages",
               "output": "response.choices.0.message.content",
               "input_tokens": "response.usage.prompt_tokens",
               "output_tokens": "response.usage.completion_tokens",
               "latency_s": "duration_ms", "level": "response.choices.0.finish_reason"},
    "langfuse": {"record_id": "id", "input": "input", "output": "output.content",
                 "model": "model", "level": "level", "status_message": "statusMessage",
                 "latency_s": "latency", "cost_usd": "calculatedTotalCost",
                 "input_tokens": "usage.input", "output_tokens": "usage.output",
                 "trace_id": "traceId"},
    "langsmith": {"record_id": "id", "input": "inputs.question", "output": "outputs.output",
                  "model": "extra.metadata.ls_model_name", "level": "status",
                  "status_message": "error", "cost_usd": "total_cost", "latency_s": None},
    "promptfoo": {"record_id": None, "output": "response.output", "reference": "vars.expected",
                  "model": "provider.id", "latency_s": "latencyMs",
                  "input_tokens": "response.tokenUsage.prompt"},
    "qa_csv": {"record_id": "id", "input": "question", "output": "answer",
               "reference": "expected", "latency_s": "latency", "model": "model"},
    "anthropic": {"record_id": "id", "input": "request.messages",
                  "output": "response.content.0.text", "model": "model",
                  "latency_s": "latency_ms", "input_tokens": "response.usage.input_tokens"},
    "gateway": {"record_id": "request_id", "input": "request_body.messages",
                "output": "response_body.choices.0.message.content",
                "model": "request_body.model", "level": "status",
                "status_message": "response_body.error.message", "latency_s": "latency",
                "cost_usd": "cost"},
    "duration_csv": {"record_id": None, "input": "prompt", "output": "completion",
                     "latency_s": "duration_s", "model": "model", "user_action": None},
}
SCALED = ("issue_chat_log", "openai", "promptfoo", "anthropic", "gateway")


def _file(tmp_path: Path, shape: str) -> Path:
    name, text = SHAPES[shape][:2] if shape in SHAPES else MORE_SHAPES[shape]
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_init_finds_each_column_at_any_depth(tmp_path, shape):
    found = propose(sample_rows(_file(tmp_path, shape))).proposals
    for column, path in EXPECTED[shape].items():
        assert (found[column].path if column in found else None) == path, column
    assert isinstance(found["output"].example, str)
    scale = found["latency_s"].scale if "latency_s" in found else None
    assert scale == (0.001 if shape in SCALED else None)
    if shape == "gateway":  # an HTTP status: 4xx and 5xx are failed calls
        assert found["level"].value_map == {"200": "DEFAULT", "429": "ERROR"}


def test_the_proposal_is_printed_with_examples_guesses_and_what_is_unmapped(tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    _file(tmp_path, "openai")
    init.main(argparse.Namespace(what=["openai.jsonl"], name="starter", dir=".", field=[],
                                 force=False))
    out = capsys.readouterr().out
    assert "sampled 20 rows" in out
    assert "   output_tokens  response.usage.completion_tokens  e.g. 12" in out
    assert " ? level " in out and "map stop→DEFAULT, error→ERROR" in out  # a guess, marked
    assert "left unmapped" in out and "response.usage.total_tokens" in out
    text = (tmp_path / "conf/experiment/starter.yaml").read_text()
    assert "edit_rate" not in text and "exact_match" not in text  # nothing feeds them
    assert "override /metrics: [pipeline_failure_rate, echo_rate, latency]" in text


def test_an_output_that_is_an_object_is_refused(tmp_path):
    path = tmp_path / "obj.jsonl"
    path.write_text(jsonl([{"prompt": f"p{i}", "response": {"ok": True, "n": i}}
                           for i in range(5)]))
    with pytest.raises(ConfigError, match=r"no path that holds the output text; 'response' is "
                                          r"an object, not text"):
        propose(sample_rows(path))
    with pytest.raises(ConfigError, match=r"'response' holds object values, not text"):
        propose(sample_rows(path), {"output": "response"})
    rows = sample_rows(_file(tmp_path, "issue_chat_log"))
    with pytest.raises(ConfigError, match=r"its text is at response.text"):
        propose(rows, {"output": "response"})


def _check_run(run: evalkit.Run, shape: str) -> None:
    first_id, p50 = SHAPES[shape][2:] if shape in SHAPES else ("gw-0", SHAPES["openai"][3])
    m = run.manifest
    assert (m["n_records"], m["n_excluded"]) == (N, N_FAILED)
    ids = run.records.column("record_id").to_pylist()
    if first_id is not None:
        assert first_id in ids
    metrics = {(r["metric"], r["slice"]): r for r in run.metrics.to_pylist()}
    slices = {s for _, s in metrics if s.startswith("model=")}
    assert all(any(model in s for s in slices) for model in MODELS), slices
    assert "model=null" not in slices
    if p50 is not None:
        assert metrics[("latency.p50", "all")]["value"] == pytest.approx(p50)
    assert metrics[("pipeline_failure_rate.raw", "all")]["value"] == pytest.approx(N_FAILED / N)


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["openai", "langfuse", "langsmith", "promptfoo", "qa_csv",
                                   "gateway"])
def test_init_then_one_run_gives_correct_numbers(tmp_path, monkeypatch, shape):
    monkeypatch.chdir(tmp_path)
    name = _file(tmp_path, shape).name
    init.main(argparse.Namespace(what=[name], name="starter", dir=".", field=[], force=False))
    _check_run(evalkit.run("starter"), shape)


@pytest.mark.e2e
def test_the_issues_chat_log_from_the_command_line(tmp_path):
    """Exactly `evalkit init chat_logs.jsonl`, then one run, with no hand edit."""
    _file(tmp_path, "issue_chat_log")
    run_cli("init", "chat_logs.jsonl", cwd=tmp_path)
    cfg = run_cli("run", "+experiment=starter", "--cfg", "job", cwd=tmp_path).stdout
    assert "path: meta.latency_ms" in cfg and "scale: 0.001" in cfg  # the transform, shown
    out = run_cli("run", "+experiment=starter", cwd=tmp_path).stdout
    assert f"excluded {N_FAILED} (pipeline_failure {N_FAILED})" in out
    run = evalkit.open_run("latest", tmp_path / "runs")
    _check_run(run, "issue_chat_log")
    kept = [r for i, r in enumerate(issue_chat_log()) if i % 5 != 4]
    edited = sum(r["meta"]["user_edited"] for r in kept) / len(kept)
    (rate,) = [r["value"] for r in run.metrics.to_pylist()
               if (r["metric"], r["slice"]) == ("edit_rate", "all")]
    assert rate == pytest.approx(edited)
    # every key of the row was mapped: none is left over in metadata (which may keep the
    # message list beside the input text)
    meta = json.loads(run.records.column("metadata").to_pylist()[0] or "{}")
    assert not set(meta) & {"id", "request", "response", "meta"}, meta
