"""``evalkit run``: Hydra composes the config, the pipeline runs it.

Hydra owns the command line here (``--cfg job``, ``--help``, overrides, ``+experiment=``,
``-m``), so every Hydra habit works as-is. The config tree ships inside the package
(``evalkit/conf``); ``./conf`` in the working directory is on the search path too."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
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


@contextlib.contextmanager
def _without_mode_probe() -> Iterator[None]:
    """Hydra composes the whole config twice per run: once only to read ``hydra.mode`` (a
    config may make a run without -m a sweep), then for the run itself; the probe costs
    ~0.15 s of every start. It answers None when no config sets ``hydra.mode``, so where that
    is known, the probe is replaced by its answer."""
    from hydra._internal.hydra import Hydra

    probe = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = probe  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    """Run Hydra's command line with ``argv`` (everything after ``evalkit run``)."""
    register_resolvers()
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    # no config of evalkit's own tree sets hydra.mode; one elsewhere (./conf, a search path,
    # another config dir or name, the command line) may, so Hydra probes for it as usual
    bundled_only = not user_conf.is_dir() and not any(
        a.startswith(("-", "hydra.searchpath", "hydra.mode", "+hydra.mode")) for a in argv)
    if user_conf.is_dir() and not any(a.startswith("hydra.searchpath") for a in argv):
        argv = [f"hydra.searchpath=[file://{user_conf.resolve()}]", *argv]
    sys.argv = ["evalkit run", *argv]
    with _without_mode_probe() if bundled_only else contextlib.nullcontext():
        _task()
