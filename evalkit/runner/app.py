"""``evalkit run``: Hydra composes the config, the pipeline runs it.

Hydra owns the command line here (``--cfg job``, ``--help``, overrides, ``+experiment=``,
``-m``), so every Hydra habit works as-is. The config tree ships inside the package
(``evalkit/conf``); ``./conf`` in the working directory is on the search path too."""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from evalkit.errors import EvalkitError


def _data_path(name: str) -> str:
    """``${evalkit.data:quickstart.jsonl}``: the path of a data file bundled with evalkit."""
    path = resources.files("evalkit.data") / name
    if not path.is_file():
        raise ValueError(f"no bundled data file '{name}' in evalkit/data")
    return str(path)


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("evalkit.data"):
        OmegaConf.register_new_resolver("evalkit.data", _data_path)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _task(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from evalkit import config as config_mod
    from evalkit.runner.pipeline import execute

    overrides = list(HydraConfig.get().overrides.task)
    try:
        rc = config_mod.load(cfg, overrides)
        execute(rc)
    except EvalkitError as exc:
        if os.environ.get("EVALKIT_FULL_ERROR"):
            raise
        print(f"evalkit: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


def main(argv: list[str]) -> None:
    """Run Hydra's command line with ``argv`` (everything after ``evalkit run``)."""
    register_resolvers()
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    if user_conf.is_dir() and not any(a.startswith("hydra.searchpath") for a in argv):
        argv = [f"hydra.searchpath=[file://{user_conf.resolve()}]", *argv]
    sys.argv = ["evalkit run", *argv]
    _task()
