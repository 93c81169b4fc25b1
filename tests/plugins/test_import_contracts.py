"""The import contracts in pyproject.toml (checked by ``lint-imports`` in ``make test``) cover
every registered plugin: a plugin added to the entry points but not to the independence
contract would escape it."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_independence_contract_lists_every_plugin_module():
    project = _pyproject()
    plugin_modules = {value.split(":")[0]
                      for group in project["project"]["entry-points"].values()
                      for value in group.values()}
    contracts = {c["id"]: c for c in project["tool"]["importlinter"]["contracts"]}
    assert set(contracts["plugins-stand-alone"]["modules"]) == plugin_modules


def test_no_registered_plugin_lives_in_a_private_module():
    project = _pyproject()
    private = [value for group in project["project"]["entry-points"].values()
               for value in group.values()
               if any(part.startswith("_") for part in value.split(":")[0].split("."))]
    assert private == []
