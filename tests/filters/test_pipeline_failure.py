import json

import pytest

from evalkit.analysis.pipeline_failure import (
    PipelineFailureConfig,
    is_http_error_body,
    is_null_completion,
    is_request_envelope,
)
from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.pipeline_failure import PipelineFailureFilter

ENVELOPE = {"completion": None, "reasoning": None,
            "rawRequest": {"model": "llama-3.2-3b", "max_tokens": 720000,
                           "messages": [{"role": "user", "content": "hi"}]}}


def mark(batch, rows, **cfg):
    return PipelineFailureFilter("pf", PipelineFailureConfig(**cfg), None).mark(
        batch(rows)).to_pylist()


def test_error_level_reason_carries_status_message(batch):
    out = mark(batch, [{"level": "error", "status_message": "Error code: 404 - no model",
                        "output": "fine"},
                       {"level": "ERROR", "output": "fine"},
                       {"level": "DEFAULT", "output": "fine"}])
    assert out == ["level=ERROR: Error code: 404 - no model", "level=ERROR", None]


@pytest.mark.parametrize("output, reason", [
    (None, "output is null (no completion)"),
    ("", "output is empty"),
    (" \n\t ", "output is empty"),
    (json.dumps(ENVELOPE), "output is a logged request envelope, not a completion"),
    (json.dumps(ENVELOPE, indent=2), "output is a logged request envelope, not a completion"),
    # the envelope logged as a JSON string holding JSON (double-encoded)
    (json.dumps(json.dumps(ENVELOPE)), "output is a logged request envelope, not a completion"),
    ('{"completion": null, "reasoning": null}',
     "output is a completion object whose completion is null"),
    ('{"error": {"message": "rate limited", "code": 429}}', "output is an HTTP error body"),
    ("<!DOCTYPE html><html><title>502 Bad Gateway</title></html>",
     "output is an HTTP error body"),
    # the error bodies of other providers and servers, whatever the order of their keys:
    # Anthropic's (the type tag first), vLLM's and Mistral's ({"object": "error"} beside
    # a "message"), Spring Boot's, an RFC 9457 problem, an OpenAI batch line's
    ('{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
     "output is an HTTP error body"),
    ('{"object": "error", "message": "max_tokens is too large", "type": '
     '"BadRequestError", "param": null, "code": 400}', "output is an HTTP error body"),
    ('{"object":"error","message":"Service tier capacity exceeded","type":'
     '"service_tier_capacity_exceeded","param":null,"code":"3505"}',
     "output is an HTTP error body"),
    ('{"timestamp": "2026-11-28T04:00:00Z", "status": 500, "error": "Internal Server Error",'
     ' "path": "/v1/chat"}', "output is an HTTP error body"),
    ('{"type": "about:blank", "title": "Service Unavailable", "status": 503, "detail": '
     '"upstream timed out"}', "output is an HTTP error body"),
    (json.dumps({"id": "batch_req_1", "custom_id": "r1", "response": None,
                 "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"}}),
     "output is an HTTP error body"),
])
def test_non_completions_are_marked(batch, output, reason):
    assert mark(batch, [{"level": "DEFAULT", "output": output}]) == [reason]


@pytest.mark.parametrize("output", [
    "Paris is the capital of France.",
    '{"name": "Maria Keller", "city": "Zurich"}',  # structured output, valid JSON
    '{"request": "book a flight", "completion": null}',  # "request" is not a request object
    '{"completion": "Sure, here it is", "rawRequest": {"model": "x"}}',  # answered
    '{"error": null, "content": "ok"}',
    '{"detail": "see below", "content": "the answer"}',
    # an application's own JSON answer that reports an error in its data, or is typed
    '{"answer": "no flights found", "error": "none on that date"}',
    '{"type": "tool_use", "name": "search", "input": {"q": "error"}}',
    '{"object": "chat.completion", "choices": [{"message": {"content": "ok"}}], '
    '"error": null}',
    "Ünïcödé ✓ 日本語の回答です",
    "<html>not an error page, just markup in an answer</html>",
    '"just a JSON string"',
    "x" * 1_000_000,  # huge output
])
def test_genuine_completions_are_kept(batch, output):
    assert mark(batch, [{"output": output}]) == [None]


def test_first_matching_reason_wins_and_checks_can_be_turned_off(batch):
    rows = [{"level": "ERROR", "output": json.dumps(ENVELOPE)}, {"output": ""},
            {"output": json.dumps(ENVELOPE)}]
    assert mark(batch, rows, levels=[], empty_output=False, request_envelope=False,
                null_completion=False, http_error=False) == [None, None, None]
    assert mark(batch, rows, levels=[])[0].startswith("output is a logged request envelope")


def test_status_message_pattern(batch):
    rows = [{"status_message": "upstream timeout after 30s", "output": "partial"},
            {"status_message": "ok", "output": "fine"}]
    out = mark(batch, rows, status_message_pattern="(?i)timeout")
    assert out == ["status message matches pattern: upstream timeout after 30s", None]


def test_bad_status_pattern_is_a_config_error():
    with pytest.raises(ConfigError, match=r"filters.pf.status_message_pattern: .*RE2"):
        validate_dataclass(PipelineFailureConfig, {"status_message_pattern": "(a)\\1"},
                           "filters.pf", "filter plugin 'pipeline_failure'")


def test_many_rows_mixed_chunks(batch):
    rows = [{"output": json.dumps(ENVELOPE)} if i % 3 == 0 else {"output": f"answer {i}"}
            for i in range(3000)]
    out = mark(batch, rows)
    assert sum(o is not None for o in out) == 1000
    assert all((o is not None) == (i % 3 == 0) for i, o in enumerate(out))


def test_empty_batch(batch):
    assert mark(batch, []) == []


def test_helpers_direct():
    assert is_request_envelope(json.dumps(ENVELOPE))
    assert not is_request_envelope("not json")
    assert not is_request_envelope("[1, 2]")
    assert is_null_completion('{"completion": null, "usage": {"input": 3}}')
    assert not is_null_completion('{"completion": null, "answer": "42"}')
    assert is_http_error_body('{"detail": "Not Found"}')
    assert not is_http_error_body('{"detail": "x", "choices": [{"text": "y"}]}')


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_hints_on_the_outputs_that_can_match_give_the_hints_on_all(batch, monkeypatch, share):
    """The hint patterns run only on outputs starting with '{', '"{' or '<' (after
    whitespace) that no check has a reason for yet (an error level); the reasons must be
    those of running every pattern on every output, with none, some or all outputs such
    candidates, nulls, error levels and table chunks among them."""
    import random

    import pyarrow as pa
    import pyarrow.compute as pc

    import evalkit.analysis.pipeline_failure as pf

    rng = random.Random(3)
    shaped = [json.dumps(ENVELOPE), " \n" + json.dumps(ENVELOPE, indent=2),
              json.dumps(json.dumps(ENVELOPE)), '{"completion": null}',
              '\t{"error": {"code": 500}}', "<!doctype html><h1>503</h1>", "<HTML>404</HTML>",
              '{"name": "x"}', "<b>bold answer</b>"]
    plain = ["Paris.", "", None, ' "quoted" {"error": 1}', "x{\"request\": 1}", "text <html>"]
    rows = [{"output": rng.choice(shaped) if rng.random() < share else rng.choice(plain),
             "level": "ERROR" if rng.random() < 0.3 else "DEFAULT"} for _ in range(400)]
    table = pa.Table.from_batches([batch(rows[:150]), batch(rows[150:])])
    got = pf.failure_reasons(table, PipelineFailureConfig())
    monkeypatch.setattr(pf, "_hints", lambda output, among: lambda pattern: pc.fill_null(
        pc.match_substring_regex(output, pattern), False))
    assert got.to_pylist() == pf.failure_reasons(table, PipelineFailureConfig()).to_pylist()
    failed = sum(r["output"] in ("", None) or r["level"] == "ERROR" for r in rows)
    assert (share == 0.0) == (got.null_count == 400 - failed)


def test_each_distinct_candidate_is_checked_once_with_the_flags_of_each_row():
    """Candidates repeat (one rate-limit body for thousands of failed calls): the exact check
    runs once per distinct text, and every row gets its text's verdict; null and empty
    candidates are never failures; rows the hint did not pick stay false."""
    import pyarrow as pa

    from evalkit.analysis.pipeline_failure import _confirm

    error, other = '{"error": {"code": 429}}', '{"name": "x"}'
    texts = [error, other, None, error, "", "plain", error, other]
    hint = pa.array([True, True, True, True, True, False, None, True])
    seen: list[str] = []

    def check(text: str) -> bool:
        seen.append(text)
        return is_http_error_body(text)

    output = pa.chunked_array([texts[:3], texts[3:]], pa.string())
    assert _confirm(output, hint, check).to_pylist() == [True, False, False, True, False,
                                                         False, False, False]
    assert sorted(seen) == sorted([error, other])
