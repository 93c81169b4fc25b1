"""``transcripts``: Claude Code session logs and OpenAI chat conversations, one record per
assistant turn, with the turn-splitting rules of docs/agents.md."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError, SourceError
from evalkit.sources.transcripts import TranscriptsConfig, TranscriptsSource
from tests.sources.conftest import RejectsCtx, read_collecting

read_all = read_collecting


@pytest.fixture
def ctx(tmp_path):
    return RejectsCtx(run_id="r1", run_dir=tmp_path / "run", cache_dir=tmp_path / "cache",
                      rejects=[])


SID = "11111111-2222-4333-8444-555555555555"
DATA = Path(__file__).resolve().parents[2] / "evalkit" / "data" / "agent_sessions"


class Log:
    """Writes a Claude Code session the way Claude Code does (a line per event; an assistant
    message's content blocks on lines of their own sharing the message id and usage)."""

    def __init__(self, sid: str = SID) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.sid = sid
        self.tag = uuid.uuid4().hex  # each log's events have uuids of their own

    def _event(self, kind: str, message: dict[str, Any], side: bool = False,
               **extra: Any) -> None:
        self.n += 1
        self.lines.append(json.dumps({
            "parentUuid": None, "isSidechain": side, "userType": "external",
            "cwd": "/repo", "sessionId": self.sid, "version": "2.0.14", "gitBranch": "main",
            "type": kind, "message": message, "uuid": f"{self.tag}-{self.n}",
            "timestamp": f"2026-11-03T09:00:{self.n:02d}.000Z", **extra}))

    def user(self, text: Any, side: bool = False, **extra: Any) -> Log:
        self._event("user", {"role": "user", "content": text}, side, **extra)
        return self

    def results(self, *results: tuple[str, Any, bool], side: bool = False) -> Log:
        blocks = [{"type": "tool_result", "tool_use_id": tid, "content": content,
                   **({"is_error": True} if err else {})} for tid, content, err in results]
        return self.user(blocks, side)

    def assistant(self, *blocks: dict[str, Any], side: bool = False, mid: str = "",
                  model: str = "claude-sonnet-4-5", usage: dict[str, int] | None = None,
                  **extra: Any) -> Log:
        mid = mid or f"msg_{self.n}"
        usage = usage or {"input_tokens": 10, "cache_read_input_tokens": 100,
                          "cache_creation_input_tokens": 5, "output_tokens": 20}
        for block in blocks:
            self._event("assistant", {"id": mid, "role": "assistant", "model": model,
                                      "content": [block], "usage": usage}, side,
                        requestId="req_1", **extra)
        return self

    def raw(self, line: str) -> Log:
        self.lines.append(line)
        return self

    def write(self, path: Path) -> Path:
        path.write_text("\n".join(self.lines) + "\n")
        return path


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool(tid: str, name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def source(ctx, **cfg: Any) -> TranscriptsSource:
    return TranscriptsSource("transcripts", TranscriptsConfig(**cfg), ctx)


def records(ctx, path: Path, **cfg: Any) -> list[dict[str, Any]]:
    table = read_all(source(ctx, path=str(path), **cfg))
    rows = table.to_pylist()
    for r in rows:
        r["metadata"] = json.loads(r["metadata"])
    return rows


def test_one_record_per_assistant_turn_with_its_tool_results_as_context(ctx, tmp_path):
    log = (Log().user("Why does test_total fail?")
           .assistant(text("Let me run it."), tool("t1", "Bash", command="pytest -k total"),
                      mid="m1")
           .results(("t1", "E   assert 0.36000001 == 0.36\n1 failed", True))
           .assistant(tool("t2", "Read", file_path="model.py"), mid="m2")
           .results(("t2", [{"type": "text", "text": "13  return Decimal(float(x))"}], False))
           .assistant(text("Line 13 converts through float."), mid="m3")
           .user("Thanks, and why ROUND_HALF_UP?")
           .assistant(text("Invoices round half up."), mid="m4"))
    rows = records(ctx, log.write(tmp_path / f"{SID}.jsonl"))
    assert [r["record_id"] for r in rows] == [f"{SID}:0", f"{SID}:1"]
    first, second = rows
    assert first["input"] == "Why does test_total fail?"
    # the answer is the text after the turn's last tool result, not the narration before
    assert first["output"] == "Line 13 converts through float."
    assert first["context"] == ["[Bash error] E   assert 0.36000001 == 0.36\n1 failed",
                                "[Read] 13  return Decimal(float(x))"]
    assert first["session_id"] == SID and first["model"] == "claude-sonnet-4-5"
    assert first["observation_id"] == "m3"
    # usage counted once per API message (m1 has two lines), cache reads included in input
    assert first["input_tokens"] == 3 * (10 + 100 + 5) and first["output_tokens"] == 60
    assert first["latency_s"] == pytest.approx(6.0)  # prompt at :01, answer at :07
    assert first["metadata"]["tool_calls"] == [
        {"id": "t1", "name": "Bash", "ok": False, "error": "E   assert 0.36000001 == 0.36"},
        {"id": "t2", "name": "Read", "ok": True}]
    assert first["metadata"]["turn_index"] == 0 and first["metadata"]["cwd"] == "/repo"
    assert second["context"] == [] and second["metadata"]["tool_calls"] == []
    assert second["input"] == "Thanks, and why ROUND_HALF_UP?"


def test_malformed_lines_are_rejects_and_the_session_goes_on(ctx, tmp_path):
    log = (Log().user("Hi").raw('{"type":"assistant","message":{"content":[{"ty')
           .raw("[1, 2]").assistant(text("Hello."))
           .raw(json.dumps({"type": "assistant", "sessionId": SID})))
    path = log.write(tmp_path / "s.jsonl")
    rows = records(ctx, path)
    assert [r["output"] for r in rows] == ["Hello."]
    assert [(r["location"], r["reason"].split(":")[0]) for r in ctx.rejects] == [
        (f"{path}:2", "malformed JSON"), (f"{path}:3", "expected a JSON object per line, got list"),
        (f"{path}:5", "a 'assistant' event without a message object")]
    assert ctx.rejects[0]["raw"].startswith('{"type":"assistant"')


def test_sidechain_turns_are_records_of_their_own_or_skipped(ctx, tmp_path):
    log = (Log().user("Find the slow commit.")
           .assistant(tool("t1", "Task", prompt="List commits"), mid="m1")
           .user("List commits", side=True)
           .assistant(tool("s1", "Bash", command="git log"), side=True, mid="s-m1")
           .results(("s1", "e41c9a2 flush every 500 rows", False), side=True)
           .assistant(text("e41c9a2 lowered the flush size."), side=True, mid="s-m2")
           .results(("t1", [text("e41c9a2 lowered the flush size.")], False))
           .assistant(text("The flush size change in e41c9a2."), mid="m2"))
    path = log.write(tmp_path / "s.jsonl")
    rows = records(ctx, path)
    assert [(r["record_id"], r["tags"]) for r in rows] == [
        (f"{SID}:0", []), (f"{SID}:side:0", ["sidechain"])]
    main, side = rows
    assert main["metadata"]["tool_calls"] == [{"id": "t1", "name": "Task", "ok": True}]
    assert side["input"] == "List commits" and side["metadata"]["sidechain"] is True
    assert side["context"] == ["[Bash] e41c9a2 flush every 500 rows"]
    src = source(ctx, path=str(path), sidechains="skip")
    assert [r["record_id"] for r in read_all(src).to_pylist()] == [f"{SID}:0"]
    assert src.counts["sidechain_turns_skipped"] == 1


def test_a_huge_tool_output_is_cut_and_the_cut_counted(ctx, tmp_path):
    huge = "x" * 50_000
    log = (Log().user("cat the log").assistant(tool("t1", "Bash", command="cat l"))
           .results(("t1", huge, False)).assistant(text("It is long.")))
    (row,) = records(ctx, log.write(tmp_path / "s.jsonl"), max_tool_output_chars=1000)
    assert len(row["context"][0]) < 1100
    assert row["context"][0].endswith("[49000 more characters cut by evalkit]")
    assert row["metadata"]["tool_calls"][0]["truncated_chars"] == 49_000
    assert row["metadata"]["truncated_tool_outputs"] == 1


def test_prompts_in_a_row_interruptions_and_unanswered_prompts(ctx, tmp_path):
    log = (Log().user("Rename --verbose.").user("Keep it as an alias.")
           .assistant(tool("t1", "Edit", file_path="main.py"))
           .user("[Request interrupted by user for tool use]")
           .user("Only the docs, please.")
           .assistant(text("Docs updated."))
           .user("Now commit."))
    path = log.write(tmp_path / "s.jsonl")
    rows = records(ctx, path)
    first, second = rows
    assert first["input"] == "Rename --verbose.\n\nKeep it as an alias."
    assert first["output"] is None and first["metadata"]["interrupted"] is True
    assert first["status_message"].startswith("interrupted by the user")
    assert first["metadata"]["tool_calls"] == [{"id": "t1", "name": "Edit", "ok": None}]
    assert first["metadata"]["n_tool_without_result"] == 1
    assert second["input"] == "Only the docs, please." and second["output"] == "Docs updated."
    assert [r["reason"].split(" (")[0] for r in ctx.rejects] == [
        "a user prompt with no assistant reply"]
    assert ctx.rejects[0]["raw"] == "Now commit."


def test_an_api_error_turn_is_an_error_level_record(ctx, tmp_path):
    log = (Log().user("Add the header.")
           .assistant(text('API Error: 529 {"type":"overloaded_error"}'), model="<synthetic>",
                      isApiErrorMessage=True))
    (row,) = records(ctx, log.write(tmp_path / "s.jsonl"))
    assert row["level"] == "ERROR" and row["output"] is None
    assert row["status_message"].startswith("API Error: 529") and row["model"] is None


def test_meta_and_command_messages_are_not_prompts(ctx, tmp_path):
    log = (Log().user("Caveat: The messages below were generated by the user", isMeta=True)
           .user("<command-name>/clear</command-name>")
           .raw(json.dumps({"type": "summary", "summary": "x"}))
           .user("Real question?").assistant(text("Real answer.")))
    src = source(ctx, path=str(log.write(tmp_path / "s.jsonl")))
    rows = read_all(src).to_pylist()
    assert [(r["input"], r["output"]) for r in rows] == [("Real question?", "Real answer.")]
    # a command no model answered (here /clear, with no output written) starts no turn
    assert src.counts["ignored_events"] == 2 and src.counts["local_commands"] == 1


def test_a_file_without_session_events_is_a_reject(ctx, tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"type": "summary", "summary": "x"}) + "\n")
    assert read_all(source(ctx, path=str(path))).num_rows == 0
    assert [r["location"] for r in ctx.rejects] == [str(path)]
    assert "no user or assistant event" in ctx.rejects[0]["reason"]


def test_openai_chat_conversations(ctx, tmp_path):
    conv = {"id": "c1", "model": "gpt-4o-mini", "metadata": {"task": "billing"}, "messages": [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Refund ZK7Q2P?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "get_booking", "arguments": "{\"ref\": \"ZK7Q2P\"}"}},
            {"id": "b", "type": "function", "function": {"name": "policy", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "{\"refundable\": false}"},
        {"role": "tool", "tool_call_id": "b", "content": "Error: policy service down"},
        {"role": "assistant", "content": "It is refundable."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": [{"type": "text", "text": "You're welcome."}]}]}
    bad = {"id": "c2", "messages": [{"role": "user", "content": "x"}, "oops",
                                    {"role": "robot", "content": "y"},
                                    {"role": "assistant", "content": "z"}]}
    path = tmp_path / "convs.jsonl"
    path.write_text(json.dumps(conv) + "\nnot json\n" + json.dumps({"no": "messages"}) + "\n"
                    + json.dumps(bad) + "\n")
    rows = records(ctx, path)
    assert [r["record_id"] for r in rows] == ["c1:0", "c1:1", "c2:0"]
    first = rows[0]
    assert (first["input"], first["output"]) == ("Refund ZK7Q2P?", "It is refundable.")
    assert first["context"] == ['[get_booking] {"refundable": false}',
                                "[policy error] Error: policy service down"]
    assert [(c["name"], c["ok"]) for c in first["metadata"]["tool_calls"]] == [
        ("get_booking", True), ("policy", False)]
    assert first["model"] == "gpt-4o-mini" and first["metadata"]["task"] == "billing"
    assert rows[1]["output"] == "You're welcome." and rows[1]["context"] == []
    assert [(r["location"].rsplit(":", 1)[1], r["reason"]) for r in ctx.rejects][1:] == [
        ("3", "expected an object with a 'messages' list (OpenAI chat-messages shape)"),
        ("4", "messages[1] is not an object"), ("4", "messages[2] has an unknown role 'robot'")]
    assert ctx.rejects[0]["reason"].startswith("malformed JSON")
    assert ctx.rejects[0]["location"] == f"{path}:2"


def test_a_directory_glob_and_gzip(ctx, tmp_path):
    (tmp_path / "a").mkdir()
    Log().user("q1").assistant(text("a1")).write(tmp_path / "a" / "one.jsonl")
    data = "\n".join(Log("other-session").user("q2").assistant(text("a2")).lines).encode()
    (tmp_path / "a" / "two.jsonl.gz").write_bytes(gzip.compress(data))
    assert {r["output"] for r in records(ctx, tmp_path / "a")} == {"a1", "a2"}
    assert [r["output"] for r in records(ctx, tmp_path / "a" / "*.gz")] == ["a2"]
    with pytest.raises(SourceError, match="source.path: no session file matches"):
        source(ctx, path=str(tmp_path / "nothing*.jsonl"))


def test_sessions_discovered_from_telemetry_logs(ctx, tmp_path):
    sessions = tmp_path / "projects" / "-home-dev-repo"
    sessions.mkdir(parents=True)
    Log().user("q").assistant(text("a")).write(sessions / f"{SID}.jsonl")
    Log().user("not named").assistant(text("b")).write(sessions / "other.jsonl")
    otlp = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": [
        {"key": "event.name", "value": {"stringValue": "user_prompt"}},
        {"key": "session.id", "value": {"stringValue": SID}}]}, {"attributes": [
            {"key": "session.id", "value": {"stringValue": "missing-session"}}]}]}]}]}
    logs = tmp_path / "telemetry.jsonl"
    logs.write_text(json.dumps(otlp) + "\n" + json.dumps({"session_id": SID}) + "\n")
    codex = tmp_path / "projects" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    (codex / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl").write_text(
        (Path(__file__).parent / "corpus" / "codex" /
         "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl").read_text())
    with logs.open("a") as fh:  # Codex's own telemetry names its conversation id
        fh.write(json.dumps({"conversation.id": "x", "session_id":
                             "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"}) + "\n")
    src = source(ctx, discover_from=str(logs), sessions_dir=str(tmp_path / "projects"))
    rows = read_all(src).to_pylist()
    assert [r["session_id"] for r in rows] == [SID, "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"]
    assert [r["location"] for r in ctx.rejects] == [f"{logs}:1"]
    assert "session missing-session is named in the telemetry" in ctx.rejects[0]["reason"]


@pytest.mark.parametrize("cfg, message", [
    ({}, "source.path: set path"),
    ({"path": "x", "format": "yaml"}, "source.format"),
    ({"path": "x", "sidechains": "merge"}, "source.sidechains"),
    ({"path": "x", "max_tool_output_chars": 10}, "source.max_tool_output_chars"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("sources", "source", {"plugin": "transcripts", **cfg}, "source")


def test_the_bundled_sample(ctx):
    src = source(ctx, path=str(DATA / "openai"), discover_from=str(DATA / "telemetry"),
                 sessions_dir=str(DATA / "claude"))
    rows = read_all(src).to_pylist()
    assert len({r["session_id"] for r in rows}) == 7
    with_results = [r for r in rows if r["context"]]
    assert 0 < len(with_results) < len(rows)  # turns with and without tool results
    calls = [c for r in rows for c in json.loads(r["metadata"])["tool_calls"]]
    assert {c["ok"] for c in calls} == {True, False, None}
    assert any("sidechain" in r["tags"] for r in rows)
    assert any(r["level"] == "ERROR" for r in rows)
    reasons = " ".join(r["reason"] for r in ctx.rejects)
    assert "malformed JSON" in reasons and "is named in the telemetry" in reasons
    assert any(json.loads(r["metadata"])["truncated_tool_outputs"] for r in rows)


def test_an_overlong_line_and_damaged_gzip_are_rejects(ctx, tmp_path):
    lines = Log().user("q").assistant(text("a")).lines
    lines.insert(1, json.dumps({"type": "progress", "data": "x" * 5000}))
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rows = records(ctx, path, max_line_bytes=2000)
    assert [r["output"] for r in rows] == ["a"]
    assert ctx.rejects[0]["location"] == f"{path}:2"
    assert "over the limit of 2,000" in ctx.rejects[0]["reason"]
    # gzip found by its bytes, not its name; damaged data is a reject where it starts
    data = gzip.compress(("\n".join(Log().user("q2").assistant(text("a2")).lines) + "\n")
                         .encode())
    (tmp_path / "z.jsonl").write_bytes(data[:-12] + b"garbage-----")
    rows = records(ctx, tmp_path / "z.jsonl")
    assert any("gzip" in r["reason"] for r in ctx.rejects[1:])


def test_a_session_met_twice_is_rejected_not_duplicated(ctx, tmp_path):
    log = Log().user("q").assistant(text("a"))
    log.write(tmp_path / "one.jsonl")
    log.write(tmp_path / "two.jsonl")  # a copy: same sessionId
    conv = json.dumps({"id": "c1", "messages": [{"role": "user", "content": "x"},
                                                {"role": "assistant", "content": "y"}]})
    (tmp_path / "convs.jsonl").write_text(conv + "\n" + conv + "\n")
    rows = records(ctx, tmp_path)
    assert sorted(r["record_id"] for r in rows) == [f"{SID}:0", "c1:0"]
    assert sorted(r["location"].rsplit("/", 1)[1] for r in ctx.rejects) == [
        "convs.jsonl:2", "two.jsonl"]
    assert "duplicate turn" in ctx.rejects[0]["reason"]
    # the copy's events are the first file's (same uuids): read once, the file said so
    assert "every event of this file was read already" in ctx.rejects[1]["reason"]


def test_sub_agents_in_files_of_their_own(ctx, tmp_path):
    """Claude Code 2.1+ writes each sub-agent to <session>/subagents/agent-<id>.jsonl with the
    parent's session id: each file's turns are records of their own."""
    Log().user("Find it.").assistant(tool("t1", "Task", prompt="a")).results(
        ("t1", "found", False)).assistant(text("Found.")).write(tmp_path / f"{SID}.jsonl")
    (tmp_path / SID / "subagents").mkdir(parents=True)
    for agent in ("agent-a1", "agent-b2"):
        Log().user("a", side=True).assistant(text(f"{agent} done"), side=True).write(
            tmp_path / SID / "subagents" / f"{agent}.jsonl")
    rows = records(ctx, tmp_path)
    assert sorted(r["record_id"] for r in rows) == [
        f"{SID}:0", f"{SID}:agent-a1:0", f"{SID}:agent-b2:0"]
    assert not ctx.rejects


def test_a_comment_line_gets_an_honest_reason(ctx, tmp_path):
    log = Log().raw("// exported by hand").user("q").assistant(text("a"))
    path = log.write(tmp_path / "s.jsonl")
    assert [r["output"] for r in records(ctx, path)] == ["a"]
    (reject,) = ctx.rejects
    assert reject["location"] == f"{path}:1" and "a comment line" in reject["reason"]
    assert "cut off" not in reject["reason"]


def test_a_mid_session_command_is_a_turn_of_its_own(ctx, tmp_path):
    """A custom slash command the model answers starts a turn; it is not folded into the turn
    before it (which keeps its own answer, model and tools)."""
    log = (Log().user("Why is CI red?").assistant(tool("t1", "Bash", command="make"), mid="m1")
           .results(("t1", "error: lint", True)).assistant(text("Lint fails."), mid="m2")
           .user("<command-message>review</command-message>\n<command-name>/review</command-name>"
                 "\n<command-args>src/</command-args>")
           .user([text("Review the code in $ARGUMENTS")], isMeta=True)
           .assistant(text("Looks fine."), mid="m3", model="claude-opus-4-1"))
    first, second = records(ctx, log.write(tmp_path / "s.jsonl"))
    assert (first["output"], first["model"], first["metadata"]["n_tool_errors"]) == (
        "Lint fails.", "claude-sonnet-4-5", 1)
    assert (second["input"], second["output"], second["model"]) == (
        "/review src/", "Looks fine.", "claude-opus-4-1")
    assert second["metadata"]["trigger"] == "command" and second["latency_s"] == 2.0


def test_a_turn_without_an_answer_says_whether_the_session_went_on(ctx, tmp_path):
    log = (Log().user("Deploy.").assistant(tool("t1", "Bash", command="deploy"))
           .results(("t1", "ok", False)).user("Status?").assistant(tool("t2", "Bash")))
    first, second = records(ctx, log.write(tmp_path / "s.jsonl"))
    assert "the session went on" in first["status_message"]
    assert "the session stopped" in second["status_message"]


def test_api_errors_retried_are_counted_on_the_turn(ctx, tmp_path):
    """Claude Code records each failed attempt (system api_error, retryAttempt of maxRetries)
    and, when it gives up, an isApiErrorMessage reply; a retry that succeeds answers."""
    retry = {"type": "system", "subtype": "api_error", "level": "error",
             "error": {"status": 529, "message": "529 overloaded_error"}, "retryInMs": 1000,
             "maxRetries": 10, "isSidechain": False, "sessionId": SID}
    log = Log().user("Add the header.")
    for attempt in (1, 2):
        log.raw(json.dumps({**retry, "retryAttempt": attempt, "uuid": f"r{attempt}",
                            "timestamp": f"2026-11-03T09:00:0{attempt + 1}.500Z"}))
    log.assistant(text("Header added."), mid="m1").user("And the footer?").assistant(
        text("API Error: 529 overloaded"), model="<synthetic>", isApiErrorMessage=True)
    src = source(ctx, path=str(log.write(tmp_path / "s.jsonl")))
    first, second = [dict(r, metadata=json.loads(r["metadata"]))
                     for r in read_all(src).to_pylist()]
    assert (first["output"], first["level"], first["metadata"]["api_errors"]) == (
        "Header added.", "DEFAULT", 2)
    assert first["status_message"] is None
    assert (second["level"], second["metadata"]["api_errors"]) == ("ERROR", 1)
    assert src.counts["api_retries"] == 2 and "ignored_events" not in src.counts


def test_codex_calls_failures_interrupts_and_web_searches(ctx, tmp_path):
    """Codex rollout lines as Codex 0.1xx writes them: a failed command (exit code), a web
    search (no output item, its status says), an interrupted task (turn_aborted)."""
    def line(second: int, kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": f"2026-02-23T19:34:{second:02d}.000Z", "type": kind,
                           "payload": payload})

    def total(inp: int, out: int) -> dict[str, Any]:
        return {"type": "token_count", "info": {"total_token_usage": {
            "input_tokens": inp, "cached_input_tokens": 0, "output_tokens": out,
            "reasoning_output_tokens": 0, "total_tokens": inp + out}}}

    lines = [
        line(0, "session_meta", {"id": "cx-1", "cwd": "/w", "cli_version": "0.104.0"}),
        line(1, "event_msg", {"type": "task_started", "turn_id": "t1"}),
        line(1, "response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>x</environment_context>"}]}),
        line(1, "event_msg", {"type": "user_message", "message": "Run the tests."}),
        line(2, "turn_context", {"model": "gpt-5.3-codex"}),
        line(3, "response_item", {"type": "function_call", "name": "exec_command",
                                  "arguments": '{"cmd": "pytest"}', "call_id": "c1"}),
        line(4, "event_msg", total(100, 10)),
        line(4, "event_msg", total(100, 10)),  # written twice per call
        line(5, "response_item", {"type": "function_call_output", "call_id": "c1",
                                  "output": "Process exited with code 1\nOutput:\n1 failed"}),
        line(6, "response_item", {"type": "web_search_call", "status": "completed",
                                  "action": {"query": "pytest -k"}}),
        line(7, "response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "One test fails."}]}),
        line(7, "event_msg", total(250, 30)),
        line(8, "event_msg", {"type": "task_complete", "turn_id": "t1"}),
        line(9, "event_msg", {"type": "user_message", "message": "Fix it."}),
        line(10, "response_item", {"type": "function_call", "name": "apply_patch",
                                   "arguments": "{}", "call_id": "c2"}),
        line(11, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
    ]
    path = tmp_path / "rollout-2026-02-23T19-34-00-cx-1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    first, second = records(ctx, path)
    assert (first["input"], first["output"], first["model"]) == (
        "Run the tests.", "One test fails.", "gpt-5.3-codex")
    assert first["metadata"]["tool_calls"] == [
        {"id": "c1", "name": "exec_command", "ok": False, "error": "Process exited with code 1"},
        {"id": None, "name": "web_search_call", "ok": True}]
    assert (first["input_tokens"], first["output_tokens"], first["latency_s"]) == (250, 30, 6.0)
    assert len(first["metadata"]["spans"]) == 2 + 2  # two model calls, two tool calls
    assert second["metadata"]["interrupted"] is True and second["output"] is None
    assert second["metadata"]["n_tool_without_result"] == 1
    assert first["metadata"]["format"] == "codex" and not ctx.rejects


def test_gemini_tool_calls_with_their_results_inside(ctx, tmp_path):
    """A Gemini CLI session document: tool calls carry their results (functionResponse
    output or error) and a status; tokens per gemini message."""
    call = {"id": "9y4yn8tb", "name": "write_file", "args": {"file_path": "hello.txt"},
            "result": [{"functionResponse": {"id": "9y4yn8tb", "name": "write_file",
                                             "response": {"error": "Tool not found."}}}],
            "status": "error", "timestamp": "2026-04-01T11:12:19.213Z"}
    ok = {"id": "ep9jbppf", "name": "cli_help", "args": {"question": "tools?"},
          "result": [{"functionResponse": {"id": "ep9jbppf", "name": "cli_help",
                                           "response": {"output": "read_file, shell"}}}],
          "status": "success"}
    doc = {"sessionId": "g-1", "projectHash": "abc", "startTime": "2026-04-01T11:11:56.830Z",
           "messages": [
               {"id": "u1", "timestamp": "2026-04-01T11:11:56.830Z", "type": "user",
                "content": [{"text": "create 2 hello world files"}]},
               {"id": "g1", "timestamp": "2026-04-01T11:12:19.195Z", "type": "gemini",
                "content": "I will create two files.", "toolCalls": [call, ok],
                "tokens": {"input": 6907, "output": 82, "cached": 4062, "thoughts": 247,
                           "tool": 0, "total": 7236}, "model": "gemini-3-flash-preview"},
               {"id": "g2", "timestamp": "2026-04-01T11:12:49.033Z", "type": "gemini",
                "content": "I cannot write files here.",
                "tokens": {"input": 7318, "output": 86, "cached": 6081, "thoughts": 1073,
                           "tool": 0, "total": 8477}, "model": "gemini-3-flash-preview"},
               {"id": "i1", "timestamp": "2026-04-01T11:13:00.000Z", "type": "info",
                "content": "Request cancelled."}]}
    path = tmp_path / "session-2026-04-01T11-11-g1.json"
    path.write_text(json.dumps(doc, indent=2))
    (row,) = records(ctx, tmp_path)  # found in a directory by Gemini's file name
    assert (row["input"], row["output"]) == ("create 2 hello world files",
                                             "I cannot write files here.")
    assert row["metadata"]["tool_calls"] == [
        {"id": "9y4yn8tb", "name": "write_file", "ok": False, "error": "Tool not found."},
        {"id": "ep9jbppf", "name": "cli_help", "ok": True}]
    assert row["context"] == ["[write_file error] Tool not found.", "[cli_help] read_file, shell"]
    assert (row["input_tokens"], row["output_tokens"]) == (6907 + 7318, 82 + 247 + 86 + 1073)
    assert row["latency_s"] == pytest.approx(52.203)
    assert row["metadata"]["format"] == "gemini" and not ctx.rejects
