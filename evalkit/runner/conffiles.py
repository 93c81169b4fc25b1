"""The user's config files (``./conf``, ``$EVALKIT_USER_CONF``, a ``hydra.searchpath``
directory) are input like any other: before Hydra reads them, each YAML file is checked to be
a regular file of at most :data:`MAX_CONFIG_BYTES`, whose YAML, with every alias expanded,
has at most :data:`MAX_CONFIG_NODES` nodes. A file past either bound (an alias bomb: a few
lines that expand to billions of nodes, which OmegaConf would copy one by one) is one line
naming it, exit 2, in milliseconds."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from evalkit.errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_NODES", "check_config_dirs", "check_config_file",
           "searched_dirs"]

MAX_CONFIG_BYTES = 1 << 20  # a config file is a few KB; a 1 MiB one is a mistake
MAX_CONFIG_NODES = 100_000  # nodes once aliases are expanded (evalkit's own: under 200)
_SUFFIXES = (".yaml", ".yml")


def searched_dirs(argv: Iterable[str], user_conf: Path) -> list[Path]:
    """The directories of config files a command line makes Hydra read: the user's conf
    directory, and every ``file://`` entry of a ``hydra.searchpath`` override or a
    ``--config-dir``/``-cd``."""
    import re

    dirs = [user_conf]
    args = list(argv)
    for i, arg in enumerate(args):
        if arg.lstrip("+~").startswith("hydra.searchpath="):
            dirs += [Path(p) for p in re.findall(r"file://([^,\]'\"]+)", arg)]
        elif arg in ("--config-dir", "-cd") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.partition("=")[2]))
    return dirs


def check_config_dirs(dirs: Iterable[Path]) -> None:
    """Check every YAML file under each of ``dirs`` (recursively) with
    :func:`check_config_file`."""
    for root in dirs:
        if not root.is_dir():
            continue
        for where, _, names in os.walk(root):
            for name in sorted(names):
                if name.endswith(_SUFFIXES):
                    check_config_file(Path(where) / name)


def check_config_file(path: Path) -> None:
    """Raise :class:`ConfigError` (one line naming ``path``) unless it is a regular file of
    at most :data:`MAX_CONFIG_BYTES` whose YAML expands to at most :data:`MAX_CONFIG_NODES`
    nodes, and that parses as YAML (nested at most as deep as libyaml allows: Hydra's own
    loader would exhaust Python's stack first)."""
    import yaml

    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read this config file ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: not a regular file (a FIFO, a device?); a config file "
                          "must be a plain YAML file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {info.st_size:,} bytes, more than a config file may hold "
                          f"({MAX_CONFIG_BYTES:,}); keep data out of ./conf")
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_CONFIG_BYTES + 1)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        nodes = list(yaml.compose_all(text, Loader=loader))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read this config file ({exc.strerror})") from None
    except yaml.YAMLError as exc:  # (nested past libyaml's depth: Hydra's loader would recurse)
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML: {problem}; fix the file") from None
    total = 0
    sizes: dict[int, int] = {}
    for node in nodes:
        total += _expanded(node, sizes)
        if total > MAX_CONFIG_NODES:
            break
    if total > MAX_CONFIG_NODES:
        raise ConfigError(f"{path}: its YAML aliases expand to more than "
                          f"{MAX_CONFIG_NODES:,} values (an alias bomb?); write the values "
                          "out, or use ${...} interpolation instead of &anchors")


def _expanded(root: object, sizes: dict[int, int]) -> int:
    """How many nodes ``root`` stands for with every alias expanded: an alias is the same
    node object reached again, so each node's size is computed once (no expansion happens
    here). Iterative, so a deeply nested file cannot overflow the stack."""
    import yaml

    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        children = _children(node) if isinstance(node, yaml.Node) else []
        if done:
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_CONFIG_NODES + 1)
            continue
        sizes[key] = 0  # (a node that holds itself: counted once, as a cycle it is)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: object) -> list[object]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
