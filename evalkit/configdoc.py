"""The keys of a config dataclass (name, type, default, the comment on its line), read from
the class itself, and the configuration reference built from them.

``evalkit plugins NAME`` prints one plugin's keys; ``python -m evalkit.configdoc FILE``
rewrites the generated part of ``docs/configuration.md`` (everything below :data:`MARKER`),
and a test checks that the file is up to date."""

from __future__ import annotations

import ast
import inspect
import io
import sys
import textwrap
import tokenize
from dataclasses import MISSING, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

__all__ = ["KeyDoc", "config_keys", "reference", "MARKER"]

MARKER = "<!-- Generated below by `python -m evalkit.configdoc docs/configuration.md`. -->"
_REQUIRED = "???"


@dataclass(frozen=True)
class KeyDoc:
    """One key of a config dataclass."""

    name: str
    type: str  # as written in the annotation
    default: str  # as YAML would spell it; "(required)" when there is none
    comment: str  # the field's comment: on its line, or the comment lines just above it


def _comments(cls: type) -> dict[str, str]:
    """The comment of each field defined in ``cls``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    by_line: dict[int, str] = {}
    own_line: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            by_line[tok.start[0]] = tok.string.lstrip("#").strip()
            if not tok.line[: tok.start[1]].strip():
                own_line.add(tok.start[0])
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    found: dict[str, str] = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        end = node.end_lineno or node.lineno
        trailing = [by_line[n] for n in range(node.lineno, end + 1)
                    if n in by_line and n not in own_line]
        if trailing:
            found[node.target.id] = " ".join(trailing)
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line in own_line:
            above.insert(0, by_line[line])
            line -= 1
        found[node.target.id] = " ".join(above)
    return found


def _default(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if value == "" else value
    if isinstance(value, (list, dict, tuple)):
        import json

        return json.dumps(value, default=str)
    return str(value)


def config_keys(cls: type) -> list[KeyDoc]:
    """Every key of config dataclass ``cls``, in field order, with the comment of the class
    that defines the field (a subclass's comment wins over its base's)."""
    if not is_dataclass(cls):
        return []
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if is_dataclass(klass):
            comments.update({k: v for k, v in _comments(klass).items() if v})
    keys = []
    for f in fields(cls):
        if f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        else:
            value = _REQUIRED
        default = "(required)" if value == _REQUIRED else _default(value)
        type_text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        keys.append(KeyDoc(f.name, type_text, default, comments.get(f.name, "")))
    return keys


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_table(keys: list[KeyDoc]) -> list[str]:
    """A Markdown table of ``keys``."""
    if not keys:
        return ["(no keys)"]
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for k in keys:
        lines.append(f"| `{k.name}` | `{_cell(k.type)}` | `{_cell(k.default)}` | "
                     f"{_cell(k.comment)} |")
    return lines


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _presets(group: str) -> list[str]:
    root = Path(__file__).parent / "conf" / group
    return sorted(p.stem for p in root.glob("*.yaml")) if root.is_dir() else []


_KIND_TITLES = {"sources": "Sources", "filters": "Filters", "judges": "Judges",
                "metrics": "Metrics", "sinks": "Sinks",
                "generators": "Generators (generate: shadow evaluation)"}
_KIND_GROUPS = {"sources": "source", "filters": "filters", "judges": "judges",
                "metrics": "metrics", "sinks": "sinks", "generators": "generate"}


def _shared_bases(configs: dict[str, type]) -> dict[type, list[str]]:
    """The config base classes that three or more plugins of a kind extend, each with the
    plugins that extend it; a plugin is listed under its most derived such base only."""
    users: dict[type, list[str]] = {}
    for name, cfg in configs.items():
        for base in cfg.__mro__[1:]:
            if is_dataclass(base):
                users.setdefault(base, []).append(name)
    shared = {b: names for b, names in users.items() if len(names) >= 3}
    out: dict[type, list[str]] = {}
    for name, cfg in configs.items():
        base = next((b for b in cfg.__mro__[1:] if b in shared), None)
        if base is not None:
            out.setdefault(base, []).append(name)
    return out


def reference() -> str:
    """The generated part of ``docs/configuration.md``: the runner, alert and gate keys, then every
    plugin of evalkit's own distribution, by kind and name."""
    from evalkit.comparison import GateConfig
    from evalkit.config import AlertConfig, RunnerConfig, SweepConfig
    from evalkit.registry import KINDS, registry

    out = [MARKER, "", "## Runner", "",
           "`runner.KEY=value` on the command line, or `runner:` in an experiment. Options of "
           "the `runner` group: " + ", ".join(f"`{p}`" for p in _presets("runner")) + ".", ""]
    out += key_table(config_keys(RunnerConfig))
    out += ["", "## Alerts", "",
            "Each item of the top-level `alerts:` list:", ""]
    out += key_table(config_keys(AlertConfig))
    out += ["", "## Gates", "",
            "Each item of the top-level `gates:` list (or the string form "
            "`METRIC[@SLICE]:[+|-]TOLERANCE`), checked by `evalkit compare` and "
            "`runner.baseline` (docs/trust.md):", ""]
    out += key_table(config_keys(GateConfig))
    out += ["", "## Sweep", "",
            "The top-level `sweep:` keys: how a sweep's closing table and report page rank its "
            "runs (a shadow sweep's candidates; docs/shadow.md):", ""]
    out += key_table(config_keys(SweepConfig))
    reg = registry()
    for kind in KINDS:
        entries = sorted((e for es in reg.entries(kind).values() for e in es
                          if e.distribution == "evalkit"), key=lambda e: e.name)
        if not entries:
            continue
        group = _KIND_GROUPS[kind]
        out += ["", f"## {_KIND_TITLES[kind]}", ""]
        presets = _presets(group)
        if presets:
            out += [f"Presets in the `{group}` group (`evalkit/conf/{group}/`): "
                    + ", ".join(f"`{p}`" for p in presets) + ".", ""]
        classes = {e.name: reg.get(kind, e.name) for e in entries}
        shared = _shared_bases({n: c.Config for n, c in classes.items()})
        for base, users in shared.items():
            out += [f"### {group}: keys of `{base.__name__}`", "",
                    "Taken by " + ", ".join(f"`{u}`" for u in users) + ".", ""]
            out += key_table(config_keys(base))
            out.append("")
        for e in entries:
            cls = classes[e.name]
            out += [f"### {group}: `{e.name}`", ""]
            summary = _summary(cls)
            out += [f"`{e.value}`" + (f": {summary}" if summary else ""), ""]
            keys = config_keys(cls.Config)
            base = next((b for b in shared if e.name in shared[b]), None)
            if base is not None:
                inherited = {f.name for f in fields(base)}
                keys = [k for k in keys if k.name not in inherited]
                out += [f"Its keys besides those of `{base.__name__}` (above):", ""]
            out += key_table(keys)
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def render(path: Path) -> str:
    """``path``'s hand-written part (above :data:`MARKER`) followed by :func:`reference`."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    head = text.split(MARKER)[0].rstrip()
    return (head + "\n\n" if head else "") + reference()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m evalkit.configdoc docs/configuration.md", file=sys.stderr)
        return 2
    path = Path(args[0])
    path.write_text(render(path), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
