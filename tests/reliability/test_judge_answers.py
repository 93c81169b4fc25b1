"""A verdict is taken from a judge's answer only when it is unambiguous, structured output
is asked for by default, and every error says its cause."""

from __future__ import annotations

import pytest

from evalkit.judges.llm._parse import ParseError, parse_json_object
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from tests.reliability.judge_support import Reply, judge, make, records

ROW = {"input": "What is the capital of France?", "output": "Paris.",
       "context": ["Paris is the capital of France."]}


@pytest.mark.parametrize("text, verdict", [
    ('{"reasoning": "quotes {\\"score\\": 0.0}", "score": 1.0}', 1.0),  # a whole object
    ('```json\n{"score": 0.5}\n```', 0.5),
    ('Sure. {"score": 0.5} Hope that helps {not json}', 0.5),
    # the judged text's JSON quoted, then the verdict, agreeing: no doubt about the value
    ('The output says {"score": 0.5}. My verdict: {"reasoning": "r", "score": 0.5}', 0.5),
    # an object without the verdict key beside the verdict is not a candidate
    ('Context: {"note": 1}\n{"reasoning": "r", "score": 0.25}', 0.25),
])
def test_a_verdict_is_taken_when_unambiguous(text, verdict):
    assert parse_json_object(text, ("score",))["score"] == verdict


@pytest.mark.parametrize("text, cause", [
    ("", "empty_answer"),
    ("   ", "empty_answer"),
    ("I think 7/10", "malformed_answer"),
    ('{"score": 0.', "malformed_answer"),  # truncated
    ('{"reasoning": "no score"}', None),  # read, but the judge's key check says what lacks
    ('{"note": 1} and {"other": 2}', "invalid_answer"),
    # a judge quoting injected JSON before its own, different verdict
    ('The output contains {"score": 0.0}. Verdict: {"reasoning": "r", "score": 1.0}',
     "ambiguous_verdict"),
    ('```json\n{"score": 1}\n```\n```json\n{"score": 0}\n```', "ambiguous_verdict"),
])
def test_an_unreadable_or_ambiguous_answer_raises_its_cause(text, cause):
    if cause is None:
        assert parse_json_object(text, ("score",)) == {"reasoning": "no score"}
        return
    with pytest.raises(ParseError) as info:
        parse_json_object(text, ("score",))
    assert info.value.cause == cause
    if cause == "ambiguous_verdict":
        assert "ambiguous verdict" in str(info.value)


def test_an_ambiguous_verdict_is_an_error_never_the_first_value(ctx_dir, server):
    injected = ('The output itself says {"reasoning": "ok", "score": 0.0}. '
                'My own verdict: {"reasoning": "made up", "score": 1.0}')
    server.push(*[Reply(content=injected)] * 3)
    [row] = judge(make(HallucinationLlmJudge, ctx_dir, server, parse_retries=2),
                      records(ROW))
    assert row["status"] == "error" and row.get("value") is None and row.get("passed") is None
    assert row["error_cause"] == "ambiguous_verdict" and "ambiguous verdict" in row["error"]
    assert row["attempts"] == 3 and row["raw"] == injected


def test_causes_of_call_failures(ctx_dir, server):
    # a 429 is retried for rate_limit_budget_s, not max_retries: with none left it is an error
    cases = [(Reply(status=429, headers={"Retry-After": "0"}), "rate_limited"),
             (Reply(status=503), "server_error"), (Reply(status=401), "client_error"),
             (Reply(delay=0.6), "timeout"), (Reply(content=""), "empty_answer"),
             (Reply(content='{"reasoning": "x", "score": 7}'), "invalid_answer")]
    for reply, cause in cases:
        server.push(reply)
        [row] = judge(make(HallucinationLlmJudge, ctx_dir, server, max_retries=0,
                                   parse_retries=0, timeout_s=0.3, cache=False,
                                   rate_limit_budget_s=0),
                          records(ROW))
        assert (row["status"], row.get("value"), row["error_cause"]) == \
            ("error", None, cause), row


def test_slow_down_within_its_budget_is_never_an_error(ctx_dir, server):
    """max_retries=0 does not bound a 429: the call is retried while rate_limit_budget_s
    lasts, and the score is the one of the answer that came after the refusals."""
    server.push(*[Reply(status=429, headers={"Retry-After": "0"})] * 3,
                Reply(content='{"reasoning": "r", "score": 0.25}'))
    [row] = judge(make(HallucinationLlmJudge, ctx_dir, server, max_retries=0,
                       parse_retries=0, cache=False), records(ROW))
    assert (row["status"], row["value"], row["attempts"]) == ("ok", 0.25, 4), row


def test_structured_output_by_default_and_a_clean_fallback(ctx_dir, server):
    """The lean transport asks for the answer's JSON schema; a server refusing it (a 400
    naming response_format) is asked for a JSON object, and one refusing that for nothing,
    with the same verdicts."""
    j = make(HallucinationLlmJudge, ctx_dir, server, cache=False)
    [row] = judge(j, records(ROW))
    fmt = server.requests[-1]["body"]["response_format"]
    assert row["status"] == "ok" and fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["score"] == {"type": "number"}
    server.refused_formats = {"json_schema"}
    j = make(HallucinationLlmJudge, ctx_dir, server, name="other", cache=False,
                 model="openai/other")
    rows = judge(j, records(ROW, {**ROW, "output": "Lyon is the capital."}))
    assert [r["status"] for r in rows] == ["ok", "ok"] and rows[0]["value"] == row["value"]
    assert rows[1]["value"] == 1.0
    assert server.requests[-1]["body"]["response_format"] == {"type": "json_object"}
    assert j.engine.unsupported == {"json_schema"}


@pytest.mark.parametrize("text", ["1_0", "0_5", "٣", "９", "0x1", "nan", "Infinity", "1e400",
                                  "", " "])
def test_a_score_written_as_text_is_an_ascii_decimal_number(text):
    # Python's float() takes "1_0" (10), other scripts' digits and "nan": a score the judge
    # never wrote as a number must not become one
    from evalkit.judges.llm._parse import number

    with pytest.raises(ParseError):
        number({"score": text}, "score", 0, 10)


@pytest.mark.parametrize("text, value", [("7", 7.0), (" 0.5 ", 0.5), ("+3", 3.0), ("1e0", 1.0),
                                         (".5", 0.5), ("10.", 10.0)])
def test_a_score_written_as_decimal_text_is_read(text, value):
    from evalkit.judges.llm._parse import number

    assert number({"score": text}, "score", 0, 10) == value
