"""How numbers are written for people: the console, the report and the listing commands
share it. Only the standard library is imported here."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["ZERO", "mc_suffix", "number", "plain"]

ZERO = 1e-12  # below this a float is rounding noise (a kappa of 8.86e-17 is 0)


def plain(value: float, digits: int = 4) -> str:
    """``value`` rounded to ``digits`` significant digits, written out in positional notation
    (``1830``, ``0.0000123``): never ``1.83e+03``, which reads as a different kind of number
    to most people."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    places = digits - 1 - math.floor(math.log10(abs(value)))
    text = f"{round(value, places):.{max(places, 0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def mc_suffix(low: float | None, high: float | None, details: Any, digits: int = 4) -> str:
    """``" ±e"`` to put after an interval whose bounds a bootstrap drew, when their
    Monte-Carlo error e (``details.mc_error``; ``details`` a dict or its JSON text) could
    change the last of the ``digits`` significant digits shown of a bound: another seed
    would print other digits there. ``""`` otherwise."""
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except ValueError:
            return ""
    mc = details.get("mc_error") if isinstance(details, dict) else None
    if not isinstance(mc, (int, float)) or not mc > 0:
        return ""
    shown = [abs(b) for b in (low, high) if b is not None and math.isfinite(b) and b != 0]
    if not shown:
        return ""
    unit = 10.0 ** (math.floor(math.log10(min(shown))) - (digits - 1))
    return f" ±{plain(float(mc), 1)}" if mc >= unit / 2 else ""


def number(value: float) -> str:
    """A float for people: four significant digits, no scientific notation for ordinary
    sizes, and rounding noise shown as 0."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if abs(value) < ZERO:
        return "0"
    if abs(value) >= 1e4:
        return f"{value:.0f}" if value == int(value) or abs(value) >= 1e6 else f"{value:.1f}"
    return f"{value:.4g}"
