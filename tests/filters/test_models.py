import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.models import ModelsConfig, ModelsFilter

MODELS = ["gpt-4o-mini", "GPT-4o", "llama-3.2-3b-instruct", None, "a.b (x)"]


def mark(batch, **cfg):
    return ModelsFilter("m", ModelsConfig(**cfg), None).mark(
        batch([{"model": m} for m in MODELS])).to_pylist()


def test_include_with_wildcards(batch):
    assert mark(batch, include=["gpt-4o*"]) == [
        None, None, "model llama-3.2-3b-instruct is not included",
        "model is null (not included)", "model a.b (x) is not included"]


def test_exclude_is_literal_apart_from_wildcards(batch):
    out = mark(batch, exclude=["*-instruct", "a.b (x)"], ignore_case=False)
    assert out == [None, None, "model llama-3.2-3b-instruct is excluded", None,
                   "model a.b (x) is excluded"]
    # '.' is not a regex wildcard
    assert mark(batch, exclude=["a?b (x)"])[4] == "model a.b (x) is excluded"
    assert mark(batch, exclude=["axb (x)"])[4] is None


def test_case_sensitivity(batch):
    assert mark(batch, include=["gpt*"], ignore_case=False)[1] == \
        "model GPT-4o is not included"


def test_needs_a_list():
    with pytest.raises(ConfigError, match="set include or exclude"):
        validate_dataclass(ModelsConfig, {}, "filters.m", "filter")
