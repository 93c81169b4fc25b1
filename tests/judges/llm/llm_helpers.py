"""Helpers of the LLM judge tests: build a judge against the fake server, make records, run a
judge the way the runner does."""

from __future__ import annotations

import asyncio
from typing import Any

from fake_llm_server import FakeLLMServer

from evalkit.context import RunContext
from evalkit.results.schemas import RECORDS, conform


def make(cls: type, ctx: RunContext, server: FakeLLMServer | None = None, name: str = "j",
         **options: Any) -> Any:
    """A judge of class ``cls`` pointed at ``server``, with its config validated."""
    options.setdefault("model", "openai/fake-judge")
    if server is not None:
        options.setdefault("api_base", server.url)
    options.setdefault("backoff_s", 0.01)
    config = cls.Config(**options)
    config.validate()
    return cls(name, config, ctx)


def records(*rows: dict[str, Any]) -> Any:
    """A records table (full schema) from partial rows; ``record_id`` defaults to r<i>."""
    return conform([{"record_id": f"r{i}", **row} for i, row in enumerate(rows)], RECORDS)


def judge(j: Any, table: Any) -> list[dict[str, Any]]:
    """Run ``j.ajudge`` the way the runner does (one event loop per batch)."""
    return asyncio.run(j.ajudge(table))
