"""A reply that is only tool calls is a completion: its output is the calls as JSON text, not
null, which the pipeline_failure filter reads as "no completion" (a failed call). The shapes:
OpenAI's ``tool_calls`` (and the older ``function_call``), Anthropic's ``tool_use`` blocks,
OpenTelemetry GenAI's ``tool_call`` parts."""

from __future__ import annotations

import json

import pytest

from evalkit.sources._chat import chat_column

OPENAI_CALL = {"id": "call_1", "type": "function",
               "function": {"name": "add", "arguments": "{\"a\": 4, \"b\": 4}"}}


@pytest.mark.parametrize("reply, calls", [
    ({"role": "assistant", "content": None, "tool_calls": [OPENAI_CALL]}, [OPENAI_CALL]),
    ({"role": "assistant", "content": None,
      "function_call": {"name": "add", "arguments": "{}"}},
     [{"name": "add", "arguments": "{}"}]),
    ([{"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "doc 4"}}]}],
     [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "doc 4"}}]),
    ([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}]}],
     [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}]),
])
def test_a_reply_of_tool_calls_only_is_its_calls(reply, calls):
    (out,), lists = chat_column("output", [reply])
    assert out is not None and json.loads(out) == calls
    assert 0 in lists  # the messages are kept beside it


def test_text_beside_tool_calls_is_the_output():
    reply = {"role": "assistant", "content": "Let me add them.", "tool_calls": [OPENAI_CALL]}
    assert chat_column("output", [reply])[0] == ["Let me add them."]
    # a reply with neither text nor calls has no output
    assert chat_column("output", [{"role": "assistant", "content": None}])[0] == [None]


def test_a_responses_output_of_a_function_call_only_is_its_call():
    """OpenAI Responses' output items: a reasoning item, then a function call, no message:
    the output is the call, not the JSON of every item (the reasoning's included)."""
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
            "arguments": "{\"id\": 5}", "status": "completed"}
    items = [{"type": "reasoning", "id": "rs_1", "summary": []}, call]
    (out,), _ = chat_column("output", [items])
    assert json.loads(out) == [call]
