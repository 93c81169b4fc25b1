"""Plugin discovery through ``importlib.metadata`` entry points.

evalkit's built-ins are declared in its own ``pyproject.toml`` under the same groups as any
third party's, so there is one discovery path. Entries are loaded only when a config names
them. ``EVALKIT_DISABLE_PLUGIN_AUTOLOAD=1`` keeps only evalkit's own distribution.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from evalkit.errors import PluginError

__all__ = ["KINDS", "PluginEntry", "Registry", "registry"]

KINDS = ("sources", "filters", "judges", "metrics", "sinks", "generators")
_SINGULAR = {"sources": "source", "filters": "filter", "judges": "judge", "metrics": "metric",
             "sinks": "sink", "generators": "generator"}
_CORE_DIST = "evalkit"


@dataclass(frozen=True)
class PluginEntry:
    """One registered plugin: where it comes from, not yet imported."""

    kind: str
    name: str
    value: str
    distribution: str
    version: str

    def load(self) -> type:
        obj = EntryPoint(self.name, self.value, f"evalkit.{self.kind}").load()
        _check_protocol(self, obj)
        return obj


def _check_protocol(entry: PluginEntry, cls: object) -> None:
    from evalkit.plugin import check_plugin

    problem = check_plugin(entry.kind, cls)
    if problem is not None:
        raise PluginError(f"{_SINGULAR[entry.kind]} plugin '{entry.name}' ({entry.value}, from "
                          f"{entry.distribution} {entry.version}) {problem}")


def _scan() -> dict[str, dict[str, list[PluginEntry]]]:
    """Every evalkit entry point of the installed distributions (``entry_points()`` already
    keeps one copy of a distribution that sits twice on sys.path, the first, as imports do);
    only the distributions that declare one have their METADATA read, for name and version."""
    only_core = os.environ.get("EVALKIT_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0")
    found: dict[str, dict[str, list[PluginEntry]]] = {k: {} for k in KINDS}
    installed = entry_points()  # one scan of the distributions
    names: dict[int, tuple[str, str]] = {}  # a distribution's name and version, read once
    for kind in KINDS:
        for ep in installed.select(group=f"evalkit.{kind}"):
            if id(ep.dist) not in names:
                meta = ep.dist.metadata if ep.dist is not None else {}
                names[id(ep.dist)] = (meta.get("Name") or "?", meta.get("Version") or "?")
            dist_name, dist_version = names[id(ep.dist)]
            if only_core and dist_name.lower().replace("_", "-") != _CORE_DIST:
                continue
            entry = PluginEntry(kind, ep.name, ep.value, dist_name, dist_version)
            found[kind].setdefault(ep.name, []).append(entry)
    return found


class Registry:
    """All installed plugins, by kind and name."""

    def __init__(self) -> None:
        self._entries = _scan()
        self._loaded: dict[tuple[str, str], type] = {}

    def entries(self, kind: str) -> dict[str, list[PluginEntry]]:
        return self._entries[kind]

    def all_entries(self) -> list[PluginEntry]:
        return [e for kind in KINDS for es in self._entries[kind].values() for e in es]

    def get(self, kind: str, name: str) -> type:
        """The plugin class for ``name``; raises :class:`PluginError` naming the fix."""
        key = (kind, name)
        if key in self._loaded:
            return self._loaded[key]
        candidates = self._entries[kind].get(name)
        if not candidates:
            known = sorted(self._entries[kind])
            close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise PluginError(
                f"unknown {_SINGULAR[kind]} plugin '{name}': {hint}installed: "
                f"{', '.join(known) or '(none)'}"
            )
        if len(candidates) > 1:
            who = " and ".join(f"{c.distribution} {c.version} ({c.value})" for c in candidates)
            raise PluginError(
                f"{_SINGULAR[kind]} plugin name '{name}' is registered twice, by {who}: "
                "uninstall one of them"
            )
        cls = candidates[0].load()
        self._loaded[key] = cls
        return cls


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, scanned once."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry()
    return _REGISTRY
