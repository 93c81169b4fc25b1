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
from evalkit.commands.init_mapping import io_text, propose, sample_rows
from evalkit.errors import ConfigError
from tests.commands.log_shapes import (
    MODELS,
    MORE_SHAPES,
    N_FAILED,
    NEW_SHAPES,
    SHAPES,
    N,
    _answer,
    _question,
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
               "output": "response.choices.0.message",
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
                  "output": "response.content", "model": "model",  # its text blocks
                  "latency_s": "latency_ms", "input_tokens": "response.usage.input_tokens"},
    "gateway": {"record_id": "request_id", "input": "request_body.messages",
                "output": "response_body.choices.0.message",
                "model": "request_body.model", "level": "status",
                "status_message": "response_body.error.message", "latency_s": "latency",
                "cost_usd": "cost"},
    "duration_csv": {"record_id": None, "input": "prompt", "output": "completion",
                     "latency_s": "duration_s", "model": "model", "user_action": None},
    # shapes no test had before the second round of checks (content blocks, a spend log
    # with JSON text inside, OpenTelemetry attributes with dotted keys, a thumbs vote)
    "anthropic_blocks": {"record_id": "log_id", "input": "request.messages",
                         "output": "response.content", "model": "request.model",
                         "level": "http_status", "status_message": "response.error.message",
                         "latency_s": "duration_ms",
                         "output_tokens": "response.usage.output_tokens"},
    "litellm": {"record_id": "request_id", "input": "messages",
                "output": "response.choices.0.message", "model": "model",
                "level": "status", "latency_s": "request_duration_ms", "cost_usd": "spend",
                "input_tokens": "prompt_tokens"},
    "otel_genai": {"record_id": "spanId", "trace_id": "traceId",
                   "input": "attributes.ai.prompt.messages",
                   "output": "attributes.ai.response.text", "model": "attributes.ai.model.id",
                   "level": "status.code", "status_message": "status.message",
                   "input_tokens": "attributes.gen_ai.usage.input_tokens",
                   "timestamp": "startTimeUnixNano", "latency_s": None},
    "flattened_csv": {"record_id": "id", "input": "request.messages", "output": "response.text",
                      "model": "meta.model", "level": "response.finish_reason",
                      "latency_s": "meta.latency_ms", "cost_usd": "meta.cost_usd",
                      "user_action": "meta.user_edited"},
    "flattened_jsonl": {"record_id": "id", "input": "request.messages",
                        "output": "response.text", "model": "meta.model",
                        "level": "response.finish_reason", "latency_s": "meta.latency_ms",
                        "user_action": "meta.user_edited"},
    "openai_responses": {"record_id": "response.id", "input": "request.input",
                         "output": "response.output", "model": "request.model",
                         "level": "response.status", "latency_s": "elapsed_ms",
                         "output_tokens": "response.usage.output_tokens"},
    "thumbs_csv": {"record_id": None, "input": "prompt", "output": "completion",
                   "latency_s": "latency_ms", "model": None, "user_action": None},
    # the third round: a Batch API output (no prompt in it; a failed line has no response),
    # a LangSmith CSV (JSON text cells, a batch of one conversation), a RAG dataset with
    # its retrieved passages, a gateway log with the latency as a string of milliseconds
    "openai_batch": {"record_id": "id", "input": None,
                     "output": "response.body.choices.0.message",
                     "model": "response.body.model", "status_message": "error.message",
                     "input_tokens": "response.body.usage.prompt_tokens", "latency_s": None},
    "langsmith_csv": {"record_id": "id", "input": "inputs.messages", "output": "outputs.output",
                      "status_message": "error", "cost_usd": "total_cost", "model": None,
                      "latency_s": None},
    "ragas_csv": {"record_id": None, "input": "user_input", "output": "response",
                  "reference": "reference", "context": "retrieved_contexts", "model": None},
    "langsmith_llm": {"record_id": "id", "input": "inputs.messages",
                      "output": "outputs.generations.0.0.message.kwargs.content",
                      "model": "outputs.llm_output.model_name", "level": "status",
                      "input_tokens": "outputs.llm_output.token_usage.prompt_tokens"},
    "helicone": {"record_id": "request.id", "input": "request.body.messages",
                 "output": "response.body.choices.0.message", "model": "model",
                 "level": "status", "status_message": "response.body.error.message",
                 "latency_s": "latency", "cost_usd": "cost"},
}
SCALED = ("issue_chat_log", "openai", "promptfoo", "anthropic", "gateway", "anthropic_blocks",
          "litellm", "thumbs_csv", "flattened_csv", "flattened_jsonl", "openai_responses",
          "helicone")


def _file(tmp_path: Path, shape: str) -> Path:
    name, text = SHAPES[shape][:2] if shape in SHAPES else {**MORE_SHAPES, **NEW_SHAPES}[shape]
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
    if shape == "otel_genai":  # a span's status: 2 is ERROR
        assert found["level"].value_map == {"0": "DEFAULT", "1": "DEFAULT", "2": "ERROR"}


def test_what_cannot_be_mapped_is_said_with_the_reason(tmp_path):
    """A duration held only as start and end, and messages written as Python's printout,
    are named in the proposal, not silently left as they are."""
    mapping = propose(sample_rows(_file(tmp_path, "otel_genai")))
    assert "not mapped: latency_s: the rows have a start (startTimeUnixNano) and an end " \
           "(endTimeUnixNano) but no duration" in io_text(mapping)
    # pandas' to_csv writes a list cell as Python's printout: read as text, and said so
    path = tmp_path / "repr.csv"
    path.write_text("prompt,answer\n" + "".join(
        f"\"[{{'role': 'user', 'content': 'q{i}'}}]\",a{i}\n" for i in range(3)))
    assert "check input: prompt holds Python's printout of a list or dict" in \
        io_text(propose(sample_rows(path)))
    assert "check" not in io_text(propose(sample_rows(_file(tmp_path, "flattened_csv"))))


def test_a_column_the_rows_lack_is_said_in_one_line(tmp_path):
    """A Batch API output holds no prompt and a LangSmith CSV no model: init says which
    columns it found nowhere, on one line, and why a Batch output has no prompt."""
    lines = io_text(propose(sample_rows(_file(tmp_path, "openai_batch")))).splitlines()
    (line,) = [x for x in lines if x.startswith("not found")]
    assert line.startswith("not found in the sampled rows: input, reference, latency_s, "
                           "cost_usd ("), line
    assert "custom_id" in line and "batch's input file" in line
    assert "model" not in line
    lines = io_text(propose(sample_rows(_file(tmp_path, "langsmith_csv")))).splitlines()
    (line,) = [x for x in lines if x.startswith("not found")]
    assert "model" in line and "latency_s" not in line  # latency has its own note
    text = io_text(propose(sample_rows(_file(tmp_path, "issue_chat_log"))))
    assert "not found in the sampled rows: reference (" in text


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


_P50 = SHAPES["openai"][3]  # every shape's latencies are 400 + 100 i ms
# shape -> (the id of the first row, latency p50 of the kept calls, failed calls, models)
# for the shapes beyond SHAPES: counted by hand from log_shapes.py
RUNS = {**{shape: (first, p50, N_FAILED, MODELS) for shape, (_, _, first, p50) in
           SHAPES.items()},
        "anthropic": ("msg_000", _P50, N_FAILED, MODELS),
        "gateway": ("gw-0", _P50, N_FAILED, MODELS),
        "duration_csv": (None, 1.35, 0, MODELS),  # no call failed: the median of 20
        "anthropic_blocks": ("anth-0", _P50, N_FAILED, MODELS),
        "litellm": ("ll-000", _P50, N_FAILED, MODELS),
        "otel_genai": (f"{0:016x}", None, N_FAILED, MODELS),
        "thumbs_csv": (None, _P50, N_FAILED, ()),
        "flattened_csv": ("chat-000", _P50, N_FAILED, MODELS),
        "flattened_jsonl": ("chat-000", _P50, N_FAILED, MODELS),
        "openai_responses": ("resp_0", _P50, N_FAILED, MODELS),
        "openai_batch": ("batch_req_000", None, N_FAILED, MODELS),
        "langsmith_csv": ("1f0e0000-aaaa-4bbb-8ccc-000000000000", None, N_FAILED, ()),
        "ragas_csv": (None, None, 0, ()),
        "helicone": ("hl-0", _P50, N_FAILED, MODELS),
        "langsmith_llm": ("run-000", None, N_FAILED, MODELS)}


def _check_run(run: evalkit.Run, shape: str) -> None:
    first_id, p50, failed, models = RUNS[shape]
    m = run.manifest
    assert (m["n_records"], m["n_excluded"]) == (N, failed)
    records = run.records.to_pylist()
    if first_id is not None:
        assert records[0]["record_id"] == first_id
    # the first row's prompt and answer, as text (not a message list or a block list); a
    # Batch output holds no prompt
    if shape == "openai_batch":
        assert records[0]["input"] is None
    else:
        assert records[0]["input"].endswith(_question(0)), records[0]["input"]
    assert records[0]["output"] == ("No idea." if shape == "promptfoo" else
                                    "I don't know." if shape == "ragas_csv" else _answer(0))
    if shape == "ragas_csv":  # the retrieved passages, as a list
        assert records[0]["context"] == ["Keys of project 0 rotate under Settings.",
                                         "Billing."]
    metrics = {(r["metric"], r["slice"]): r for r in run.metrics.to_pylist()}
    # a failed Batch line (LangSmith run) has no response (outputs), so no model: its calls
    # are the model=null slice
    slices = {s for _, s in metrics if s.startswith("model=") and not (
        shape in ("openai_batch", "langsmith_llm") and s == "model=null")}
    assert len(slices) == len(models) and all(any(m in s for s in slices) for m in models)
    if p50 is not None:
        assert metrics[("latency.p50", "all")]["value"] == pytest.approx(p50)
    else:
        assert ("latency.p50", "all") not in metrics  # no latency metric without latency
    assert metrics[("pipeline_failure_rate.raw", "all")]["value"] == pytest.approx(failed / N)


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["openai", "langfuse", "langsmith", "promptfoo", "qa_csv",
                                   "anthropic", "gateway", "duration_csv", "anthropic_blocks",
                                   "litellm", "otel_genai", "thumbs_csv", "flattened_csv",
                                   "flattened_jsonl", "openai_responses", "openai_batch",
                                   "langsmith_csv", "ragas_csv", "helicone",
                                   "langsmith_llm"])
def test_init_then_one_run_gives_correct_numbers(tmp_path, monkeypatch, shape):
    monkeypatch.chdir(tmp_path)
    name = _file(tmp_path, shape).name
    init.main(argparse.Namespace(what=[name], name="starter", dir=".", field=[], force=False))
    run = evalkit.run("starter")
    _check_run(run, shape)
    if shape.startswith("flattened"):  # as the nested log: edits counted, nothing left over
        kept = [r for i, r in enumerate(issue_chat_log()) if i % 5 != 4]
        (rate,) = [r["value"] for r in run.metrics.to_pylist()
                   if (r["metric"], r["slice"]) == ("edit_rate", "all")]
        assert rate == pytest.approx(sum(r["meta"]["user_edited"] for r in kept) / len(kept))
        meta = json.loads(run.records.column("metadata").to_pylist()[0] or "{}")
        assert set(meta) <= {"input_messages"}, meta


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
