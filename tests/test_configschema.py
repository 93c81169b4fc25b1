"""The JSON schema of the config tree (for editors): every bundled experiment's composed
config is valid against it; a typo'd key or a value of the wrong type is not."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from evalkit.configschema import config_schema, type_schema
from evalkit.runner.app import register_resolvers
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _composed(experiment: str) -> dict:
    register_resolvers()
    with initialize_config_module("evalkit.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"+experiment={experiment}"])
    return OmegaConf.to_container(cfg, resolve=False)


@pytest.mark.parametrize("experiment", ["quickstart", "audit", "judge_agreement", "llm_judge",
                                        "langfuse_audit"])
def test_bundled_experiments_are_valid(validator, experiment: str) -> None:
    errors = [e.message for e in validator.iter_errors(_composed(experiment))]
    assert errors == []


def test_typos_and_wrong_types_are_not(validator) -> None:
    good = _composed("quickstart")
    for judges in ({"x": {"plugin": "prompt_echo", "threshhold": 0.5}},
                   {"x": {"plugin": "prompt_echo", "threshold": "high"}},
                   {"x": {"plugin": "no_such_plugin"}}):
        bad = copy.deepcopy(good)
        bad["judges"] = judges
        assert not validator.is_valid(bad), judges
    bad = copy.deepcopy(good)
    bad["runner"]["batch_sise"] = 5
    assert not validator.is_valid(bad)
    ok = copy.deepcopy(good)
    ok["judges"]["prompt_echo"]["threshold"] = "${oc.env:ECHO_THRESHOLD}"  # interpolations
    assert validator.is_valid(ok)


def test_type_schema() -> None:
    assert type_schema("str | None") == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert type_schema("list[str]") == {"type": "array", "items": {"type": "string"}}
    assert type_schema("dict[str, float]") == {"type": "object",
                                               "additionalProperties": {"type": "number"}}


def test_the_cli_exports_it(tmp_path) -> None:
    out = run_cli("plugins", "--json-schema", cwd=tmp_path).stdout
    schema = json.loads(out)
    assert "judges.prompt_echo" in schema["$defs"]
    assert schema["$defs"]["judges.prompt_echo"]["properties"]["threshold"]["description"] \
        == "similarity at or above which the output is an echo"
