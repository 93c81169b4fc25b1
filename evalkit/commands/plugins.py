"""``evalkit plugins``: what is installed, from which distribution."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from evalkit.registry import KINDS

    parser.add_argument("--kind", choices=KINDS, help="only this kind")


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from evalkit.registry import registry

    reg = registry()
    table = Table(header_style="bold")
    for col in ("kind", "name", "distribution", "version", "object"):
        table.add_column(col)
    entries = sorted(reg.all_entries(), key=lambda e: (e.kind, e.name, e.distribution))
    for e in entries:
        if args.kind and e.kind != args.kind:
            continue
        dup = len(reg.entries(e.kind)[e.name]) > 1
        table.add_row(e.kind, e.name + (" [red](duplicate)[/]" if dup else ""),
                      e.distribution, e.version, e.value)
    Console().print(table)
    return 0
