"""``task_completion``: the share of records whose task really got done, from an execution
outcome: a record column (``outcome``), a judge's verdict, or a ``state_check`` judge that
queried the downstream database ("I've booked your flight" with no booking is a failure)."""

from __future__ import annotations

from typing import Any

from evalkit.metrics._outcomes import OutcomeConfig, outcomes
from evalkit.metrics._signals import (
    excluded_mask,
    index_slices,
    judge_known,
    mean_row,
    reasons,
)
from evalkit.plugin import Metric

__all__ = ["TaskCompletionMetric"]


class TaskCompletionMetric(Metric):
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
