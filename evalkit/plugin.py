"""The public API for plugin authors."""

from __future__ import annotations

__all__ = ["plugin_class"]


def plugin_class(kind: str, name: str) -> type:
    """The class of the installed plugin ``name`` of ``kind`` (``sources``, ``filters``,
    ``judges``, ``metrics``, ``sinks``), found and checked as a config naming it would be.
    A plugin that builds on another plugin gets it here, never by importing its module."""
    from evalkit.registry import registry

    return registry().get(kind, name)
