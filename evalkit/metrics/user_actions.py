"""``edit_rate`` and ``bypass_rate``: what users did with the outputs. Each record's action is
``accepted``, ``edited`` or ``bypassed``: from ``records.user_action`` and, where the text
the user finally kept (``final_output``) is known, from the normalised edit distance between
output and final text, so a whitespace fix is not an edit and a rewrite is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.metrics._signals import (
    SliceConfig,
    excluded_mask,
    index_slices,
    mean_row,
    reasons,
)
from evalkit.metrics._stats import slice_sql
from evalkit.plugin import Metric

__all__ = [
    "ACTIONS", "BypassRateMetric", "classify", "edit_distance", "EditConfig", "EditRateConfig",
    "EditRateMetric", "normalised_edit_distance",
]

ACTIONS = ("accepted", "edited", "bypassed")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions, each 1) between ``a``
    and ``b``, one numpy row per character of ``a``. Within a row the insertion chain
    ``new[j] = min(new[j], new[j-1] + 1)`` is a running minimum of ``new[j] - j``, plus ``j``."""
    if a == b:
        return 0
    if not a or not b:
        return max(len(a), len(b))
    if len(a) < len(b):
        a, b = b, a
    codes = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    cols = np.arange(len(b) + 1)
    prev = cols.copy()
    for i, ch in enumerate(a, 1):
        cost = (codes != ord(ch)).astype(np.int64)
        cur = np.empty_like(prev)
        cur[0] = i
        cur[1:] = np.minimum(prev[1:] + 1, prev[:-1] + cost)
        cur = np.minimum.accumulate(cur - cols) + cols
        prev = cur
    return int(prev[-1])


def normalised_edit_distance(a: str, b: str) -> float:
    """Edit distance divided by the longer text's length: 0 same text, 1 nothing kept."""
    longest = max(len(a), len(b))
    return edit_distance(a, b) / longest if longest else 0.0


@dataclass(frozen=True)
class EditConfig(SliceConfig):
    use_final_output: bool = True  # where final_output is known, decide edited vs accepted by it
    edit_threshold: float = 0.05  # normalised edit distance above which the output was edited

    def validate(self) -> None:
        super().validate()
        if not 0.0 <= self.edit_threshold < 1.0:
            raise ValueError(f"edit_threshold: {self.edit_threshold} is not within [0, 1)")


@dataclass(frozen=True)
class EditRateConfig(EditConfig):
    among: str = "used"  # denominator: used (accepted + edited) or all (bypassed too)

    def validate(self) -> None:
        super().validate()
        if self.among not in ("used", "all"):
            raise ValueError(f"among: {self.among!r} is not used or all")


def classify(con: Any, cfg: EditConfig) -> tuple[Any, list[str | None], list[str | None],
                                                 np.ndarray, int]:
    """The records table, each record's action (None: unknown), why unknown, the edit
    distance (NaN where not computed) and how many recorded actions the distance changed."""
    cols = "".join(f", {slice_sql(c)}" for c in dict.fromkeys(cfg.slice_by))
    table = con.execute("SELECT record_id, excluded_by, user_action, output, final_output"
                        f"{cols} FROM records ORDER BY record_id").to_arrow_table()
    recorded = table.column("user_action").to_pylist()
    outputs = table.column("output").to_pylist()
    finals = table.column("final_output").to_pylist()
    actions: list[str | None] = []
    why: list[str | None] = []
    dist = np.full(len(recorded), np.nan)
    changed = 0
    for i, (act, out, final) in enumerate(zip(recorded, outputs, finals, strict=True)):
        act = act.strip().lower() if isinstance(act, str) else None
        if act is not None and act not in ACTIONS:
            actions.append(None)
            why.append(f"user_action {act[:30]!r} is not one of {', '.join(ACTIONS)}")
            continue
        if act != "bypassed" and cfg.use_final_output and final is not None and out is not None:
            dist[i] = normalised_edit_distance(out, final)
            derived = "edited" if dist[i] > cfg.edit_threshold else "accepted"
            changed += act is not None and act != derived
            act = derived
        actions.append(act)
        why.append(None if act else "no user_action and no final_output")
    return table, actions, why, dist, changed


class _ActionRate(Metric):
    """Share of records with one action, over included records whose action is known."""

    Config = EditConfig
    higher_is_better = False
    thread_safe = True  # compute() may run beside other metrics, on its own cursor
    action = ""

    def __init__(self, name: str, config: EditConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def _denominator(self) -> set[str]:
        return set(ACTIONS)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        table, actions, why, dist, changed = classify(con, cfg)
        excluded = excluded_mask(table)
        denominator = self._denominator()
        values = np.array([np.nan if a not in denominator else float(a == self.action)
                           for a in actions])
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            inc = idx[~excluded[idx]]
            counts = {a: sum(actions[i] == a for i in inc) for a in ACTIONS}
            details: dict[str, Any] = {
                "what": f"share of {' + '.join(sorted(denominator))} outputs that were "
                        f"{self.action}", "actions": counts,
                "edit_threshold": cfg.edit_threshold if cfg.use_final_output else None}
            edited = [dist[i] for i in inc if actions[i] == "edited" and not np.isnan(dist[i])]
            if edited:
                details["mean_edit_distance_of_edited"] = float(np.mean(edited))
            if changed:
                details["actions_changed_by_final_output"] = int(changed)
            left_out = reasons([why[i] for i in inc])
            not_in = {a: c for a, c in counts.items() if a not in denominator and c}
            if left_out or not_in:
                details["unscored"] = {**left_out, **{f"{a} (not in the denominator)": c
                                                      for a, c in not_in.items()}}
            rows.append(mean_row(self.name, label, idx, values, excluded, cfg, details))
        return rows


class EditRateMetric(_ActionRate):
    """``edit_rate``: share of used outputs (accepted or edited; ``among: all`` adds
    bypassed) that the user edited before keeping them."""

    Config = EditRateConfig
    action = "edited"

    def _denominator(self) -> set[str]:
        return {"accepted", "edited"} if self.config.among == "used" else set(ACTIONS)


class BypassRateMetric(_ActionRate):
    """``bypass_rate``: share of outputs (with a known action) the user did not use at all."""

    action = "bypassed"
