"""The corrected estimates of a run read side by side, from its metric rows: what the
summary and the report show beside the judge's number."""

from __future__ import annotations

from typing import Any

__all__ = ["corrected_readouts"]

PARTS = ("judge", "human", "rogan_gladen")


def corrected_readouts(rows: list[dict[str, Any]], slice_: str | None = "all"
                       ) -> list[dict[str, Any]]:
    """One entry per ``corrected`` metric and slice (``slice_`` only, unless None):
    ``name``, ``slice``, and for ``corrected``, ``judge``, ``human`` and ``rogan_gladen``
    the row's value, interval, method and reason (``None`` when the metric has no such row).
    ``rows`` are metric rows with ``plugin`` and ``details`` (a dict or JSON text)."""
    import json

    mine = [r for r in rows if r.get("plugin") == "corrected"
            and (slice_ is None or r["slice"] == slice_)]
    out: dict[tuple[str, str], dict[str, Any]] = {}
    bases = {r["metric"] for r in mine if r["metric"].rsplit(".", 1)[-1] not in PARTS}
    for r in mine:
        base, _, part = r["metric"].rpartition(".")
        if r["metric"] in bases:
            base, part = r["metric"], "corrected"
        elif base not in bases:
            continue
        details = r.get("details") or {}
        if isinstance(details, str):
            details = json.loads(details)
        entry = out.setdefault((base, r["slice"]), {"name": base, "slice": r["slice"]})
        entry[part] = {"value": r["value"], "low": r["ci_low"], "high": r["ci_high"],
                       "method": details.get("method"), "undefined": details.get("undefined"),
                       "n_labelled": details.get("n_labelled"), "N": details.get("N")}
    return list(out.values())
