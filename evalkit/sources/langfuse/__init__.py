"""The ``langfuse`` source: observations, traces and scores from Langfuse's public API."""

from evalkit.sources.langfuse.source import LangfuseSource, LangfuseSourceConfig

__all__ = ["LangfuseSource", "LangfuseSourceConfig"]
