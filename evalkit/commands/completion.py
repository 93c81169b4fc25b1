"""``evalkit completion bash|zsh``: the shell completion script, and what it asks for.

The script calls ``evalkit __complete`` with the line typed so far (``COMP_LINE``,
``COMP_POINT``); this module answers with the candidates, one per line: commands, each
command's options and their values, plugin names, run ids, and for ``evalkit run`` what Hydra
offers (config groups, their options, config keys) plus every key of the plugin behind an
instance (``judges.prompt_echo.`` offers ``threshold=``, ``ngram=`` ...), settable without
``+``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

__all__ = [
    "BASH", "RUN_OPTIONS", "SCRIPTS", "ZSH", "add_arguments", "candidates", "complete_main", "main",
]

BASH = r"""# evalkit shell completion (bash). Install: evalkit completion bash >> ~/.bashrc
_evalkit_complete() {
    local IFS=$'\n'
    COMPREPLY=( $(COMP_LINE="$COMP_LINE" COMP_POINT="$COMP_POINT" evalkit __complete 2>/dev/null) )
}
COMP_WORDBREAKS=${COMP_WORDBREAKS//=}
complete -o nospace -o default -F _evalkit_complete evalkit
"""

ZSH = r"""# evalkit shell completion (zsh). Install: evalkit completion zsh >> ~/.zshrc
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
""" + BASH

SCRIPTS = {"bash": BASH, "zsh": ZSH}
RUN_OPTIONS = ("--multirun", "-m", "--cfg", "--help", "--hydra-help", "--info", "--resolve",
               "--package", "-v", "-vv")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=sorted(SCRIPTS), help="the shell to complete in")


def main(args: argparse.Namespace) -> int:
    sys.stdout.write(SCRIPTS[args.shell])
    return 0


def complete_main() -> int:
    """``evalkit __complete``: print the candidates for ``$COMP_LINE`` up to ``$COMP_POINT``."""
    line = os.environ.get("COMP_LINE", "")
    point = os.environ.get("COMP_POINT", "")
    line = line[: int(point)] if point.isdigit() else line
    for candidate in candidates(line):
        print(candidate)
    return 0


def _split(line: str) -> tuple[list[str], str]:
    """The words before the one being completed (after ``evalkit``), and that word."""
    try:
        words = shlex.split(line)
    except ValueError:  # an open quote
        words = line.split()
    if line and not line[-1].isspace() and words:
        current = words.pop()
    else:
        current = ""
    return words[1:], current


def _full(items: list[str] | tuple[str, ...], current: str) -> list[str]:
    """The items that start with ``current``, each followed by a space (a whole word)."""
    return [f"{i} " for i in sorted(set(items)) if i.startswith(current)]


def candidates(line: str) -> list[str]:
    from evalkit.cli import COMMANDS

    words, current = _split(line)
    if not words:
        if current.startswith("-"):
            return _full(["--help", "--version"], current)
        return _full([c for c in COMMANDS if not c.startswith("_")], current)
    command, rest = words[0], words[1:]
    if command == "run":
        return _run(rest, current)
    if command not in COMMANDS:
        return []
    return _command(command, rest, current)


def _command(command: str, rest: list[str], current: str) -> list[str]:
    import importlib

    from evalkit.cli import COMMANDS

    parser = argparse.ArgumentParser(prog=f"evalkit {command}")
    module = importlib.import_module(COMMANDS[command][0])
    module.add_arguments(parser)
    options = {s: a for a in parser._actions for s in a.option_strings}
    previous = rest[-1] if rest else ""
    if previous in options and options[previous].nargs != 0:
        action = options[previous]
        if action.choices:
            return _full([str(c) for c in action.choices], current)
        if action.dest == "run":
            return _full(["latest", *_run_ids()], current)
        return []  # a file name or a number: the shell's default completion
    if current.startswith("-"):
        return _full([s for s in options if s.startswith("--") or len(options) < 8], current)
    positionals = [a for a in parser._actions if not a.option_strings]
    given = [w for i, w in enumerate(rest) if not w.startswith("-") and
             not (i and rest[i - 1] in options and options[rest[i - 1]].nargs != 0)]
    if len(given) < len(positionals):
        action = positionals[len(given)]
    elif positionals and positionals[-1].nargs in ("*", "+"):  # report RUN [RUN ...]
        action = positionals[-1]
    else:
        return []
    if action.choices:
        return _full([str(c) for c in action.choices], current)
    if command == "plugins":
        from evalkit.registry import registry

        return _full([e.name for e in registry().all_entries()], current)
    if command in ("compare", "push", "report") or action.dest in ("run", "runs"):
        taken = set(given)
        ids = ["latest", *_run_ids()]
        if command == "report":
            from evalkit.commands._runs import sweep_ids

            ids += sweep_ids(Path("runs"))
        return _full([r for r in ids if r not in taken], current)
    return []


def _run_ids(runs_dir: str = "runs") -> list[str]:
    return [p.parent.name for p in Path(runs_dir).glob("*/*/manifest.json")]


def _run(rest: list[str], current: str) -> list[str]:
    """``evalkit run``: Hydra's own completion of groups, options and config keys, with the
    overrides rewritten as ``evalkit run`` rewrites them, plus every key of the plugin behind
    the instance being typed."""
    if current.startswith("-"):
        return _full(RUN_OPTIONS, current)
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.core_plugins.bash_completion import BashCompletion
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode

    from evalkit.config import plain_override
    from evalkit.errors import EvalkitError
    from evalkit.runner.app import register_resolvers

    register_resolvers()
    overrides = []
    for word in rest:
        if word.startswith("-"):
            continue
        try:
            overrides.append(plain_override(word))
        except EvalkitError:
            continue
    search_path = create_config_search_path("pkg://evalkit.conf")
    user_conf = Path(os.environ.get("EVALKIT_USER_CONF", "conf"))
    if user_conf.is_dir():
        search_path.prepend("evalkit-user", f"file://{user_conf.resolve()}")
    loader = ConfigLoaderImpl(config_search_path=search_path)
    found = set(BashCompletion(loader)._query("config", " ".join([*overrides, current])))
    found |= _plugin_keys(loader, overrides, current, RunMode.RUN)
    return sorted(found)


def _plugin_keys(loader: object, overrides: list[str], current: str, mode: object) -> set[str]:
    """``GROUP.INSTANCE.KEY=`` (or ``source.KEY=``, ``runner.KEY=``) for every key of the
    plugin (or the runner) behind the instance ``current`` is typing."""
    parts = current.lstrip("+").split(".")
    if len(parts) < 2 or parts[0] not in ("source", "runner", "filters", "judges",
                                          "metrics", "sinks"):
        return set()
    from omegaconf import DictConfig

    from evalkit.configdoc import config_keys
    from evalkit.errors import EvalkitError
    from evalkit.registry import registry

    try:
        cfg = loader.load_configuration(config_name="config", overrides=overrides,
                                        run_mode=mode)
    except Exception:  # an override that does not compose yet: Hydra's matches only
        return set()
    if parts[0] == "runner":
        from evalkit.config import RunnerConfig

        prefix, cls = "runner.", RunnerConfig
    else:
        node = cfg.get(parts[0]) if parts[0] == "source" else \
            (cfg.get(parts[0]) or {}).get(parts[1])
        if not isinstance(node, DictConfig) or "plugin" not in node:
            return set()
        kind = "sources" if parts[0] == "source" else parts[0]
        try:
            cls = registry().get(kind, str(node.plugin)).Config
        except EvalkitError:
            return set()
        prefix = "source." if parts[0] == "source" else f"{parts[0]}.{parts[1]}."
    return {f"{prefix}{k.name}=" for k in config_keys(cls)
            if f"{prefix}{k.name}=".startswith(current)}

