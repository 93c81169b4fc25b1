import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.filters.level import LevelConfig, LevelFilter


def mark(batch, levels, **cfg):
    return LevelFilter("lv", LevelConfig(**cfg), None).mark(
        batch([{"level": lv} for lv in levels])).to_pylist()


def test_excludes_listed_levels_case_insensitively(batch):
    assert mark(batch, ["ERROR", "error", "DEFAULT", None]) == \
        ["level=ERROR", "level=ERROR", None, None]


def test_include_list_sets_aside_the_rest(batch):
    out = mark(batch, ["DEFAULT", "WARNING", "ERROR", None], exclude=[], include=["default"])
    assert out == [None, "level=WARNING (not in include)", "level=ERROR (not in include)",
                   "level is null (not in include)"]


def test_exclude_null(batch):
    assert mark(batch, [None, "DEFAULT"], exclude=[], exclude_null=True) == \
        ["level is null", None]


def test_empty_include_is_a_config_error():
    with pytest.raises(ConfigError, match="include: an empty list"):
        validate_dataclass(LevelConfig, {"include": []}, "filters.lv", "filter plugin 'level'")
