"""The shared dotted-path walker: the fast getters agree with the general walk."""

from __future__ import annotations

import json

import pytest

from evalkit.paths import getter, value_at

ROW = {"output": {"completion": "hi", "reasoning": None},
       "usage": json.dumps({"input": 12}),
       "messages": [{"role": "user", "content": "q"}],
       "n": 3}


@pytest.mark.parametrize("path, expected", [
    ("n", 3),
    ("output.completion", "hi"),
    ("output.reasoning", None),
    ("usage.input", 12),  # a step into JSON text parses it
    ("messages.0.content", "q"),
    ("messages.1.content", None),
    ("missing.deeper.still", None),
    ("n.x", None),
])
def test_getter_and_value_at_agree(path: str, expected: object) -> None:
    assert getter(path)(ROW) == expected
    assert value_at(ROW, path) == expected
    assert value_at(json.dumps(ROW), path) == expected


def test_value_at_tolerates_non_json_text() -> None:
    assert value_at("{not json", "a") is None
    assert value_at(None, "a") is None


@pytest.mark.parametrize("path, expected", [
    ("attributes.gen_ai.request.model", "gpt-4o-mini"),  # a key with dots in it
    ("attributes.ai.prompt.messages.0.content", "q"),  # then into the JSON text it holds
    ("attributes.llm.usage", {"n": 1}),  # a plain key is taken before a dotted one
    ("attributes.llm.usage.n", 1),
    ("attributes.gen_ai.missing", None),
    ("attributes.gen_ai", None),
    ("llm.input_messages.0.message.content", "flat"),  # OpenInference's flattened keys
])
def test_a_key_with_dots_is_named_by_its_steps(path: str, expected: object) -> None:
    row = {"attributes": {"gen_ai.request.model": "gpt-4o-mini",
                          "ai.prompt": json.dumps({"messages": [{"role": "user",
                                                                 "content": "q"}]}),
                          "llm": {"usage": {"n": 1}}, "llm.usage": {"n": 2}},
           "llm": {"input_messages.0.message.content": "flat"}}
    assert value_at(row, path) == expected
    assert getter(path)(row) == expected
