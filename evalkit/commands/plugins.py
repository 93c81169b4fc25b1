"""``evalkit plugins``: what is installed, from which distribution; ``evalkit plugins NAME``:
that plugin's config keys with their types, defaults and meaning."""

from __future__ import annotations

import argparse

from evalkit.commands._output import add_format_arguments, chosen_format, emit

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from evalkit.registry import KINDS

    parser.add_argument("name", nargs="?", default=None,
                        help="a plugin's name: show its config keys")
    parser.add_argument("--kind", choices=KINDS, help="only this kind")
    parser.add_argument("--json-schema", action="store_true",
                        help="print the JSON schema of the config tree (for an editor's "
                        "completion and checks of your YAML; --out FILE writes it)")
    add_format_arguments(parser)


def main(args: argparse.Namespace) -> int:
    from evalkit.registry import registry

    reg = registry()
    if args.json_schema:
        import json

        from evalkit.configschema import config_schema

        text = json.dumps(config_schema(), indent=1) + "\n"
        if args.out:
            from pathlib import Path

            Path(args.out).write_text(text, encoding="utf-8")
        else:
            print(text, end="")
        return 0
    fmt = chosen_format(args.format, args.out)
    if args.name is not None:
        return _keys(reg, args.name, args.kind, fmt, args.out, args.csv_formulas)
    entries = sorted(reg.all_entries(), key=lambda e: (e.kind, e.name, e.distribution))
    rows = [(e.kind, e.name, e.distribution, e.version, e.value,
             "duplicate" if len(reg.entries(e.kind)[e.name]) > 1 else "")
            for e in entries if not args.kind or e.kind == args.kind]
    emit(["kind", "name", "distribution", "version", "object", "note"], rows, fmt, args.out,
         note="`evalkit plugins NAME` shows a plugin's config keys",
         csv_formulas=args.csv_formulas)
    return 0


def _keys(reg, name: str, kind: str | None, fmt: str, out: str | None,
          csv_formulas: bool) -> int:
    import difflib

    from evalkit.configdoc import config_keys
    from evalkit.errors import PluginError

    kinds = [k for k, es in ((k, reg.entries(k)) for k in
                             ([kind] if kind else ["sources", "filters", "judges", "metrics",
                                                   "sinks"]))
             if name in es]
    if not kinds:
        known = sorted({e.name for e in reg.all_entries()})
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise PluginError(f"plugins: no plugin named '{name}'; {hint}`evalkit plugins` "
                          "lists them")
    rows = []
    for k in kinds:
        cls = reg.get(k, name)
        for key in config_keys(cls.Config):
            rows.append((k, key.name, key.type, key.default, key.comment))
    note = (f"set one with {_example(kinds[0], name)}; docs/configuration.md has every "
            "plugin's keys")
    emit(["kind", "key", "type", "default", "meaning"], rows, fmt, out, note=note,
         csv_formulas=csv_formulas)
    return 0


def _example(kind: str, name: str) -> str:
    if kind == "sources":
        return f"source={name} source.KEY=VALUE"
    return f"{kind}.INSTANCE.KEY=VALUE (an instance of plugin: {name})"
