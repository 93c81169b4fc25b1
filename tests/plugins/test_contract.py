"""A plugin is checked against its contract when it loads (evalkit.plugin.check_plugin): each
way of breaking it gets a one-line "problem; fix", and every built-in honours it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from evalkit.plugin import AsyncJudge, Filter, Judge, Metric, check_plugin
from evalkit.registry import KINDS, registry


@dataclass(frozen=True)
class Frozen:
    pass


@dataclass
class Thawed:
    pass


class Good(Judge):
    Config = Frozen

    def judge(self, records):
        return []


class NotSubclassed:
    Config = Frozen

    def judge(self, records):
        return []


class NoConfig(Judge):
    def judge(self, records):
        return []


class DictConfig(Good):
    Config = dict


class ThawedConfig(Good):
    Config = Thawed


class NoMethod(Judge):
    Config = Frozen


class AsyncOnSyncContract(Good):
    async def ajudge(self, records):
        return []


class SyncAjudge(AsyncJudge):
    Config = Frozen

    def ajudge(self, records):
        return []


class NoAjudge(AsyncJudge):
    Config = Frozen


class Misspelt(Good):
    threadsafe = True


class NotABool(Good):
    thread_safe = "yes"


class BadDirection(Metric):
    Config = Frozen
    higher_is_better = "up"

    def compute(self, con):
        return []


class NoMark(Filter):
    Config = Frozen


@pytest.mark.parametrize("kind, cls, problem", [
    ("judges", NotSubclassed, "does not subclass evalkit.plugin.Judge; declare it as "
                              "`class NotSubclassed(Judge)` (from evalkit.plugin import Judge)"),
    ("judges", NoConfig, "has no Config; set `Config = <a @dataclass(frozen=True) class>`"),
    ("judges", DictConfig, "Config is <class 'dict'>, not a dataclass; decorate it "
                           "@dataclass(frozen=True)"),
    ("judges", ThawedConfig, "Config Thawed is not frozen; decorate it @dataclass(frozen=True)"),
    ("judges", NoMethod, "does not implement judge(); see evalkit.plugin.Judge"),
    ("judges", AsyncOnSyncContract, "defines ajudge() but subclasses Judge; subclass "
                                    "AsyncJudge"),
    ("judges", SyncAjudge, "ajudge is not a coroutine function; define it `async def ajudge`"),
    ("judges", NoAjudge, "does not implement ajudge(); see evalkit.plugin.AsyncJudge"),
    ("judges", Misspelt, "defines 'threadsafe', which is not part of the Judge contract; did "
                         "you mean 'thread_safe'?"),
    ("judges", NotABool, "thread_safe is 'yes'; it must be bool"),
    ("metrics", BadDirection, "higher_is_better is 'up'; it must be bool or None"),
    ("filters", NoMark, "does not implement mark(); see evalkit.plugin.Filter"),
    ("filters", Good, "does not subclass evalkit.plugin.Filter"),
    ("judges", Good("j", Frozen(), None), "is a Good, not a class; register the plugin class"),
])
def test_each_breach_is_named_with_its_fix(kind, cls, problem):
    found = check_plugin(kind, cls)
    assert found is not None and found.startswith(problem), found
    assert "\n" not in found


def test_a_plugin_that_honours_its_contract_passes():
    assert check_plugin("judges", Good) is None


@pytest.mark.parametrize("kind", KINDS)
def test_every_installed_plugin_honours_its_contract(kind):
    for name in registry().entries(kind):
        registry().get(kind, name)  # raises PluginError naming the breach
