"""``task_completion``: the share of records whose task really got done, from an execution
outcome: a record column (``outcome``), a judge's verdict, or a ``state_check`` judge that
queried the downstream database ("I've booked your flight" with no booking is a failure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.metrics._signals import (
    SignalSpec,
    SliceConfig,
    check_spec,
    excluded_mask,
    fetch,
    index_slices,
    judge_known,
    mean_row,
    numbers,
    parse_spec,
    reasons,
)


def _outcome_map() -> dict[str, float]:
    return {"success": 1.0, "failure": 0.0}


@dataclass(frozen=True)
class OutcomeConfig(SliceConfig):
    outcome: str = "outcome"  # a record column, or judge:NAME[:value|passed|label]
    outcome_map: dict[str, float] = field(default_factory=_outcome_map)  # text -> 1 success, 0 not
    threshold: float | None = None  # numeric outcomes: success when value >= threshold

    def validate(self) -> None:
        super().validate()
        check_spec(self.outcome, "outcome")


def outcomes(con: Any, cfg: OutcomeConfig, columns: list[str] | None = None
             ) -> tuple[pa.Table, np.ndarray, list[str | None], SignalSpec]:
    """The records table, per-record success (1/0, NaN unusable), why unusable, and the spec."""
    spec = parse_spec(cfg.outcome, "outcome")
    table = fetch(con, {"outcome": spec}, [*cfg.slice_by, *(columns or [])])
    success, why = numbers(table, "outcome", spec, cfg.outcome_map, cfg.threshold)
    # an outcome is success or not: any other number is unusable, never a partial success
    off = ~np.isnan(success) & ~np.isin(success, [0.0, 1.0])
    for i in np.flatnonzero(off):
        why[i] = (f"{spec.describe()} is {success[i]:g}, not 1 (success) or 0; set "
                  "threshold or outcome_map")
    success[off] = np.nan
    return table, success, why, spec


class TaskCompletionMetric:
    """Share of included records with a successful outcome, per slice; records without a
    usable outcome are unscored (counted, with reasons), never failures."""

    Config = OutcomeConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: OutcomeConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        table, success, why, spec = outcomes(con, cfg)
        excluded = excluded_mask(table)
        known = judge_known(table, "outcome", spec)
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            inc = idx[~excluded[idx]]
            details: dict[str, Any] = {"what": f"share of records whose outcome "
                                       f"({spec.describe()}) is success",
                                       "n_success": int((success[inc] == 1).sum()),
                                       "n_failure": int((success[inc] == 0).sum())}
            unusable = reasons([why[i] for i in inc])
            if unusable:
                details["unscored_reasons"] = unusable
            if not known:
                details["undefined"] = f"no judgments from judge '{spec.judge}' in this run"
            rows.append(mean_row(self.name, label, idx, success, excluded, cfg, details))
        return rows
