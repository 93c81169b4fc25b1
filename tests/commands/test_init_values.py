"""`evalkit init FILE` on the values real logs hold beside their shapes: answers that are
numbers written as text ("18"), flags written as "yes"/"no", "Y"/"N" or 1/0, timestamps and
numbers the source cannot read as they are ("01/11/2026 10:00", "812ms"), and a chat
completion that is a tool call (content null). Each is mapped so that a run counts it right,
or named with the reason; none becomes a wrong count without a word."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit.commands import init
from evalkit.commands.init_mapping import io_text, propose, sample_rows
from tests.commands.log_shapes import jsonl

N = 12


def _gsm_rows() -> list[dict[str, Any]]:
    """A maths QA log: the answers and the references are numbers written as JSON text."""
    return [{"id": f"q{i}", "question": f"What is {i} times 3?", "answer": str(3 * i),
             "expected": str(3 * i + (1 if i % 4 == 0 else 0)), "model": "m1"}
            for i in range(1, N + 1)]


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _init_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                  text: str) -> evalkit.Run:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    init.main(argparse.Namespace(what=[name], name="starter", dir=".", field=[], force=False))
    return evalkit.run("starter")


def _metric(run: evalkit.Run, metric: str) -> float:
    (value,) = [r["value"] for r in run.metrics.to_pylist()
                if (r["metric"], r["slice"]) == (metric, "all")]
    return value


@pytest.mark.parametrize("name", ["gsm.jsonl", "gsm.csv"])
def test_answers_that_are_numbers_in_text_are_the_output_and_the_reference(tmp_path, name):
    """JSON text "18" is text; a CSV cell is always text: both are an answer, not a count."""
    path = tmp_path / name
    path.write_text(jsonl(_gsm_rows()) if name.endswith("jsonl") else _csv(_gsm_rows()))
    found = propose(sample_rows(path)).proposals
    assert found["output"].path == "answer"
    assert found["reference"].path == "expected"
    assert found["input"].path == "question"


@pytest.mark.e2e
def test_numeric_answers_scored_by_exact_match(tmp_path, monkeypatch):
    run = _init_and_run(tmp_path, monkeypatch, "gsm.jsonl", jsonl(_gsm_rows()))
    right = sum(r["answer"] == r["expected"] for r in _gsm_rows())
    assert run.manifest["n_records"] == N
    assert _metric(run, "exact_match_rate") == pytest.approx(right / N)


def _flag_rows(yes: str, no: str) -> list[dict[str, Any]]:
    """A support-bot log whose failed calls are marked only by a flag (the output of a failed
    call is the gateway's error text), and whose edits by another flag."""
    return [{"id": f"c{i}", "prompt": f"How do I reset the password of account {i}?",
             "completion": "upstream connect error or disconnect/reset before headers"
             if i % 4 == 3 else f"Open Settings, choose Security, then Reset for account {i}.",
             "is_error": yes if i % 4 == 3 else no, "user_edited": yes if i % 3 == 0 else no}
            for i in range(N)]


@pytest.mark.parametrize("yes, no", [("yes", "no"), ("Y", "N"), (1, 0), ("1", "0"),
                                     ("True", "False")])
def test_flags_written_as_yes_no_map_to_the_error_level_and_edits(tmp_path, yes, no):
    path = tmp_path / "flags.jsonl"
    path.write_text(jsonl(_flag_rows(yes, no)))
    found = propose(sample_rows(path)).proposals
    assert found["level"].path == "is_error"
    assert found["user_action"].path == "user_edited"
    text = io_text(propose(sample_rows(path)))
    assert "left unmapped" not in text, text


@pytest.mark.e2e
@pytest.mark.parametrize("yes, no, name", [("yes", "no", "flags.jsonl"), ("Y", "N", "flags.csv"),
                                           (1, 0, "flags.jsonl")])
def test_a_failure_flag_sets_the_failed_calls_aside(tmp_path, monkeypatch, yes, no, name):
    rows = _flag_rows(yes, no)
    run = _init_and_run(tmp_path, monkeypatch, name,
                        jsonl(rows) if name.endswith("jsonl") else _csv(rows))
    failed = sum(r["is_error"] == yes for r in rows)
    assert (run.manifest["n_records"], run.manifest["n_excluded"]) == (N, failed)
    kept = [r for r in rows if r["is_error"] != yes]
    edited = sum(r["user_edited"] == yes for r in kept)
    assert _metric(run, "edit_rate") == pytest.approx(edited / len(kept))


def test_a_flag_whose_sample_says_only_no_still_maps_its_yes(tmp_path):
    """The first rows of a healthy log have no failure: the map still sends a later "Y" to
    ERROR (the source leaves a value its map does not list as it is: a judged failure)."""
    path = tmp_path / "healthy.jsonl"
    path.write_text(jsonl([{**row, "is_error": "N"} for row in _flag_rows("Y", "N")]))
    level = propose(sample_rows(path)).proposals["level"]
    assert level.value_map == {"N": "DEFAULT", "Y": "ERROR"}


def _tool_call_rows() -> list[dict[str, Any]]:
    """Logged Chat Completions calls: answers, tool calls (content null) and failed calls
    (an error object, no response)."""
    rows: list[dict[str, Any]] = []
    for i in range(N):
        request = {"model": "gpt-4o-mini",
                   "messages": [{"role": "user", "content": f"What is {i} plus {i}, exactly?"}]}
        if i % 6 == 5:
            rows.append({"id": f"req_{i}", "request": request,
                         "error": {"message": "Rate limit reached", "type": "requests",
                                   "code": "rate_limit_exceeded"}})
            continue
        message: dict[str, Any] = {"role": "assistant", "refusal": None,
                                   "content": f"{i} plus {i} is {2 * i}, exactly."}
        if i % 3 == 1:
            message.update(content=None, tool_calls=[{
                "id": f"call_{i}", "type": "function",
                "function": {"name": "add", "arguments": json.dumps({"a": i, "b": i})}}])
        rows.append({"id": f"req_{i}", "request": request, "response": {
            "id": f"chatcmpl-{i}", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if i % 3 == 1 else "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}}})
    return rows


@pytest.mark.e2e
def test_a_tool_call_is_a_completion_not_a_failed_call(tmp_path, monkeypatch):
    rows = _tool_call_rows()
    run = _init_and_run(tmp_path, monkeypatch, "calls.jsonl", jsonl(rows))
    failed = sum("error" in r for r in rows)
    assert (run.manifest["n_records"], run.manifest["n_excluded"]) == (N, failed)
    assert _metric(run, "pipeline_failure_rate.raw") == pytest.approx(failed / N)
    out = {r["record_id"]: r["output"] for r in run.records.to_pylist()}
    assert json.loads(out["req_1"])[0]["function"]["name"] == "add"
    assert out["req_0"] == "0 plus 0 is 0, exactly."


def _timed_rows(ts: list[Any], latency: list[Any]) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "prompt": f"Name the capital of country number {i}.",
             "completion": f"The capital of country {i} is City {i}, on the river.",
             "ts": ts[i % len(ts)], "latency": latency[i % len(latency)]} for i in range(N)]


def test_values_the_source_cannot_read_are_named_not_mapped(tmp_path):
    """Day-first dates and numbers with a unit would make every row a reject (a record lost
    for its timestamp): init leaves such a column out and says why, with an example."""
    path = tmp_path / "timed.jsonl"
    path.write_text(jsonl(_timed_rows(["01/11/2026 10:00", "02/11/2026 09:30"],
                                      ["812ms", "1,234ms", "950ms"])))
    mapping = propose(sample_rows(path))
    assert "timestamp" not in mapping.proposals and "latency_s" not in mapping.proposals
    text = io_text(mapping)
    assert "not mapped: timestamp: ts holds values the source cannot read: 12 of 12 " \
           "sampled rows (e.g. '01/11/2026 10:00': expected an ISO-8601 timestamp or an " \
           "epoch time)" in text
    assert "not mapped: latency_s: latency holds values the source cannot read: 12 of 12 " \
           "sampled rows (e.g. '812ms': expected a number)" in text
    assert "not found in the sampled rows: reference, model, cost_usd (" in text


def test_a_few_values_the_source_cannot_read_are_said_as_rejects(tmp_path):
    path = tmp_path / "timed.jsonl"
    rows = _timed_rows(["2026-11-01T10:00:00Z"], [0.8, 1.2, 0.95])
    rows[3]["latency"] = "n/a"
    path.write_text(jsonl(rows))
    mapping = propose(sample_rows(path))
    assert mapping.proposals["latency_s"].path == "latency"
    assert "check latency_s: 1 of 12 sampled rows would be a reject ('n/a': expected a " \
           "number)" in io_text(mapping)


@pytest.mark.e2e
def test_epoch_seconds_in_a_csv_cell_are_a_timestamp(tmp_path, monkeypatch):
    """A CSV cell is text: 1764000000 written there is the epoch time it is in JSON, not a
    reject ("expected an ISO-8601 timestamp") of every row."""
    rows = _timed_rows([1764000000 + 60 * i for i in range(N)], [0.8])
    run = _init_and_run(tmp_path, monkeypatch, "timed.csv", _csv(rows))
    assert (run.manifest["n_records"], run.rejects.num_rows) == (N, 0)
    got = [t.timestamp() for t in run.records.column("timestamp").to_pylist()]
    assert got == [float(r["ts"]) for r in rows]


def _mixed_rows() -> list[dict[str, Any]]:
    """A gateway log with three shapes of line: answers; failed calls whose output is the
    request envelope (latency "" where none was measured); bare error envelopes, no id."""
    rows: list[dict[str, Any]] = []
    for i in range(20):
        if i % 7 == 3:
            rows.append({"error": {"message": "The server had an error while processing "
                                              "your request.", "type": "server_error",
                                   "code": 500}})
        elif i % 7 == 5:
            rows.append({"id": f"g{i}", "input": f"Translate sentence {i} to French please",
                         "output": {"completion": None, "rawRequest": {
                             "model": "gpt-4o",
                             "messages": [{"role": "user", "content": f"Translate {i}"}]}},
                         "model": "gpt-4o", "latency_ms": "", "level": "ERROR"})
        else:
            rows.append({"id": f"g{i}", "input": f"Translate sentence {i} to French please",
                         "output": f"Phrase numéro {i} en français.", "model": "gpt-4o",
                         "latency_ms": 500 + 10 * i})
    return rows


def test_the_prompt_is_not_read_from_a_failed_calls_envelope(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(jsonl(_mixed_rows()))
    mapping = propose(sample_rows(path))
    assert mapping.proposals["input"].path == "input"
    assert "record_id" not in mapping.proposals  # three lines have no id
    text = io_text(mapping)
    assert "not mapped: record_id: id is missing in 3 of 20 sampled rows" in text
    assert "check" not in text  # latency "" is no value to the source: no reject


@pytest.mark.e2e
def test_every_failed_line_counts_as_a_failed_call(tmp_path, monkeypatch):
    """A failed call is a record set aside, not a reject (for its missing id, or its latency
    ""): rejects fall out of pipeline_failure_rate, which then read 0 of 14."""
    import gzip

    monkeypatch.chdir(tmp_path)
    with gzip.open(tmp_path / "mixed.jsonl.gz", "wt") as fh:
        fh.write(jsonl(_mixed_rows()))
    init.main(argparse.Namespace(what=["mixed.jsonl.gz"], name="starter", dir=".", field=[],
                                 force=False))
    run = evalkit.run("starter")
    failed = sum("error" in r or r.get("level") == "ERROR" for r in _mixed_rows())
    assert (run.manifest["n_records"], run.rejects.num_rows) == (20, 0)
    assert run.manifest["n_excluded"] == failed == 6
    assert _metric(run, "pipeline_failure_rate.raw") == pytest.approx(6 / 20)


def _run_tree() -> list[dict[str, Any]]:
    """A LangSmith export: per question a root chain run (question, answer) and its child
    LLM run (messages, generations); the fourth question's calls failed."""
    rows: list[dict[str, Any]] = []
    for t in range(5):
        root, question = f"00000000-0000-4000-8000-00000000000{t}", f"Capital of country {t}?"
        answer = None if t == 3 else f"The capital of country {t} is City {t}."
        rows.append({"id": root, "run_type": "chain", "trace_id": root, "parent_run_id": None,
                     "status": "error" if t == 3 else "success", "inputs": {"question": question},
                     "outputs": answer and {"output": answer}})
        rows.append({"id": f"1{root[1:]}", "run_type": "llm", "trace_id": root,
                     "parent_run_id": root, "status": "error" if t == 3 else "success",
                     "inputs": {"messages": [[{"role": "user", "content": question}]]},
                     "outputs": answer and {"generations": [[{"text": answer}]]}})
    return rows


def test_runs_of_a_tree_are_said_and_one_level_is_set_aside(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(jsonl(_run_tree()))
    mapping = propose(sample_rows(path))
    assert mapping.set_aside == ("json_extract_string(metadata, '$.\"parent_run_id\"') IS NOT "
                                 "NULL", "a child run (parent_run_id set): the output is in "
                                 "the runs with none")
    assert "set aside: 5 of 10 sampled rows are children (parent_run_id set)" in \
        io_text(mapping)


@pytest.mark.e2e
def test_child_runs_are_not_counted_as_failed_calls(tmp_path, monkeypatch):
    run = _init_and_run(tmp_path, monkeypatch, "runs.jsonl", jsonl(_run_tree()))
    excluded = {}
    for r in run.records.to_pylist():
        excluded[r["excluded_by"]] = excluded.get(r["excluded_by"], 0) + 1
    assert excluded == {None: 4, "sql": 5, "pipeline_failure": 1}


@pytest.mark.parametrize("key, values, scale", [
    ("cost_cents", [12, 30, 7], 0.01),
    ("costCents", [12, 30, 7], 0.01),
    ("cost_micros", [1200, 3000, 700], 1e-6),
    ("cost_usd", [0.12, 0.3, 0.07], None),
])
def test_a_cost_in_cents_or_micros_is_scaled_to_dollars(tmp_path, key, values, scale):
    path = tmp_path / "cost.jsonl"
    path.write_text(jsonl([{**row, key: values[i % 3]}
                           for i, row in enumerate(_timed_rows(["2026-11-01T10:00:00Z"],
                                                               [0.8]))]))
    cost = propose(sample_rows(path)).proposals["cost_usd"]
    assert (cost.path, cost.scale) == (key, scale)


@pytest.mark.parametrize("key, values, scale", [
    ("duration_ns", [812_000_000, 1_234_000_000], 1e-9),
    ("latencyNs", [812_000_000, 1_234_000_000], 1e-9),
    ("elapsed_us", [812_000, 1_234_000], 1e-6),
    ("latency_ms", [812, 1234], 0.001),
])
def test_a_latency_in_nanoseconds_is_scaled_to_seconds(tmp_path, key, values, scale):
    path = tmp_path / "lat.jsonl"
    rows = _timed_rows(["2026-11-01T10:00:00Z"], [0.8])
    path.write_text(jsonl([{k: v for k, v in row.items() if k != "latency"} |
                           {key: values[i % 2]} for i, row in enumerate(rows)]))
    latency = propose(sample_rows(path)).proposals["latency_s"]
    assert (latency.path, latency.scale, latency.guess) == (key, scale, False)


@pytest.mark.e2e
def test_an_output_in_several_chat_shapes_is_read_as_its_text(tmp_path, monkeypatch):
    """`output` is text in some lines, content blocks or an assistant message in others (a
    log written by several SDKs): read by its own name it was kept as JSON text, which a
    judge scored as the answer."""
    rows = []
    for i in range(9):
        text = f"Answer {i}: restart the service and clear the cache."
        rows.append({"id": f"s{i}", "input": f"How do I fix error {i}?", "model": "m",
                     "output": [text, [{"type": "text", "text": text}],
                                {"role": "assistant", "content": text}][i % 3]})
    run = _init_and_run(tmp_path, monkeypatch, "shapes.jsonl", jsonl(rows))
    assert run.records.column("output").to_pylist() == [
        f"Answer {i}: restart the service and clear the cache." for i in range(9)]


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_file_is_named_with_the_fix(tmp_path, indent):
    """An export written as one JSON array (Langfuse's and LangSmith's UI exports), pretty or
    on one line: init says what it is and how to make it JSONL, not "line 1 is not JSON"."""
    from evalkit.errors import ConfigError

    path = tmp_path / "export.json"
    path.write_text(json.dumps(_gsm_rows(), indent=indent))
    with pytest.raises(ConfigError, match=r"export.json is one JSON array( of 12 objects)?, "
                                          r"not JSONL \(one object a line\); make it JSONL: "
                                          r"jq -c '\.\[\]' "):
        sample_rows(path)



def _observations() -> list[dict[str, Any]]:
    """A Langfuse observations export: per trace a retrieval SPAN (its own input and
    output), the GENERATION under it, and an EVENT."""
    rows: list[dict[str, Any]] = []
    for t in range(4):
        rows += [
            {"id": f"span-{t}", "traceId": f"trace-{t}", "type": "SPAN", "name": "retrieve",
             "parentObservationId": None, "input": {"query": f"question {t}"},
             "output": {"documents": [f"doc {t}a", f"doc {t}b"]}, "level": "DEFAULT"},
            {"id": f"gen-{t}", "traceId": f"trace-{t}", "type": "GENERATION", "name": "answer",
             "parentObservationId": f"span-{t}", "model": "gpt-4o-mini", "level": "DEFAULT",
             "input": [{"role": "user", "content": f"Answer question {t} from the docs."}],
             "output": {"role": "assistant", "content": f"Answer {t}: it is in doc {t}a."}},
            {"id": f"ev-{t}", "traceId": f"trace-{t}", "type": "EVENT", "name": "feedback",
             "parentObservationId": None, "input": None, "output": "thumbs up",
             "level": "DEFAULT"}]
    return rows


@pytest.mark.e2e
def test_the_prompt_is_read_where_the_answers_are(tmp_path, monkeypatch):
    """The span's `input.query` outscored the generation's message list (a sure name under
    `input`), and every generation, the only rows judged, had no prompt."""
    path = tmp_path / "obs.jsonl"
    path.write_text(jsonl(_observations()))
    assert propose(sample_rows(path)).proposals["input"].path == "input"
    run = _init_and_run(tmp_path, monkeypatch, "obs2.jsonl", jsonl(_observations()))
    judged = [r for r in run.records.to_pylist() if r["excluded_by"] is None]
    assert [(r["record_id"], r["input"]) for r in judged] == [
        (f"gen-{t}", f"Answer question {t} from the docs.") for t in range(4)]


@pytest.mark.e2e
@pytest.mark.parametrize("name, sep", [("gsm.tsv", "\t"), ("gsm.csv", ";")])
def test_a_tsv_or_a_semicolon_csv_runs_as_init_wrote_it(tmp_path, monkeypatch, name, sep):
    """init read a .tsv with tabs and wrote `source: csv`, which read it with commas: every
    row a reject; a European CSV (;) init could not read at all."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(_gsm_rows()[0]), delimiter=sep)
    writer.writeheader()
    writer.writerows(_gsm_rows())
    run = _init_and_run(tmp_path, monkeypatch, name, out.getvalue())
    assert (run.manifest["n_records"], run.rejects.num_rows) == (N, 0)
    right = sum(r["answer"] == r["expected"] for r in _gsm_rows())
    assert _metric(run, "exact_match_rate") == pytest.approx(right / N)


@pytest.mark.e2e
@pytest.mark.parametrize("bad", ['{"id": "cut", "output": "the process was kil',  # cut short
                                 '{"id": "deep", "output": ' + "[" * 100_000 + "]" * 100_000
                                 + "}"])
def test_a_bad_line_among_good_ones_is_said_and_the_run_rejects_it(tmp_path, monkeypatch,
                                                                   capsys, bad):
    """A log cut short by a crash, or a line nested past any parser's depth: init crashed
    (RecursionError) or refused the whole file ("is not JSON"); it samples the good lines and
    says which it skipped, and the run rejects that line with its reason."""
    rows = _gsm_rows()
    text = jsonl(rows[:6]) + bad + "\n" + jsonl(rows[6:])
    run = _init_and_run(tmp_path, monkeypatch, "cut.jsonl", text)
    assert "skipped 1 line that is not a JSON object (line 7" in capsys.readouterr().out
    assert (run.manifest["n_records"], run.rejects.num_rows) == (N, 1)
    assert run.rejects.column("location").to_pylist()[0].endswith("cut.jsonl:7")


def test_a_column_is_not_read_from_one_item_of_a_list_of_several(tmp_path):
    """A Langfuse trace export: `observations` lists a retrieval span, then the generation
    that failed. `observations.0.level` is the span's, DEFAULT in every row: a level that
    never says ERROR, proposed as sure."""
    rows = []
    for t in range(6):
        failed = t == 4
        rows.append({
            "id": f"trace-{t}", "input": {"question": f"Question {t}?"},
            "output": {"answer": "Sorry, try again." if failed else f"Answer {t} is short."},
            "observations": [
                {"id": f"s{t}", "type": "SPAN", "level": "DEFAULT", "input": {"q": f"q{t}"}},
                {"id": f"g{t}", "type": "GENERATION", "model": "gpt-4o-mini",
                 "level": "ERROR" if failed else "DEFAULT",
                 "statusMessage": "429 Too Many Requests" if failed else None}]})
    path = tmp_path / "traces.jsonl"
    path.write_text(jsonl(rows))
    found = propose(sample_rows(path)).proposals
    assert not any(p.path.startswith("observations.") for p in found.values()), found
    assert "observations" in io_text(propose(sample_rows(path)))  # left unmapped, and said


def _scored_rows() -> list[dict[str, Any]]:
    """A Langfuse trace export with the scores an evaluator gave each trace."""
    return [{"id": f"trace-{t}", "input": {"question": f"Question {t}?"},
             "output": {"answer": f"Answer {t} is short and clear."},
             "scores": [{"name": "helpful", "value": t % 2, "comment": None},
                        {"name": "tone", "value": None, "stringValue": "ok"}]}
            for t in range(6)]


@pytest.mark.e2e
def test_scores_in_the_rows_are_imported_not_left_in_metadata(tmp_path, monkeypatch, capsys):
    """Another evaluator's scores sat in metadata, unread, where evalkit imports such scores
    as judgments (origin 'imported') to audit them like its own."""
    run = _init_and_run(tmp_path, monkeypatch, "scored.jsonl", jsonl(_scored_rows()))
    assert "imported scores: scores" in capsys.readouterr().out
    imported = [j for j in run.judgments.to_pylist() if j["origin"] == "imported"]
    assert sorted((j["record_id"], j["judge"], j["value"], j["label"]) for j in imported) == \
        sorted([(f"trace-{t}", "helpful", float(t % 2), None) for t in range(6)] +
               [(f"trace-{t}", "tone", None, "ok") for t in range(6)])
