"""Judge call prices from litellm's bundled model cost map, read as a JSON file so that
pricing never imports litellm (4-5 s, 165 MB) and never fetches the price list online.
An unknown model has no price: its cost is None, never 0."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

_MAP_FILE = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def _cost_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / _MAP_FILE
    try:
        # ~3 MB: orjson reads it in ~2/3 of the standard library's time (~30 ms here), on the
        # first judged answer's path
        return orjson.loads(path.read_bytes())
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return {}


@lru_cache(maxsize=256)
def token_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token for a litellm model string, or None when unknown. Tries
    the full string, then without its provider prefix (``openai/gpt-4o-mini``)."""
    table = _cost_map()
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return (float(entry["input_cost_per_token"]),
                    float(entry.get("output_cost_per_token", 0.0)))
    return None


def call_cost(prices: tuple[float, float] | None, input_tokens: int | None,
              output_tokens: int | None) -> float | None:
    """USD for one call, or None when the price or the token counts are unknown."""
    if prices is None or input_tokens is None or output_tokens is None:
        return None
    return input_tokens * prices[0] + output_tokens * prices[1]
