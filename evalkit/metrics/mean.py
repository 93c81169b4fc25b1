"""``mean``: the mean of a judge's values, filtered and raw side by side."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._judged import (
    JudgeMetricConfig,
    judge_metric_rows,
    judged_cursor_group,
    value_produces,
)
from evalkit.plugin import Metric, Produces

__all__ = ["MeanMetric"]


class MeanMetric(Metric):
    """Mean of ``value`` over records the judge scored (``status='ok'``); errors and skips
    are unscored, never zeros."""

    Config = JudgeMetricConfig
    higher_is_better = None
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: JudgeMetricConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        return value_produces(self.name, self.config)

    def cursor_group(self) -> tuple[str, ...] | None:
        return judged_cursor_group(self.config)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        def score(t: pa.Table) -> pa.Array:
            ok = pc.fill_null(pc.equal(t.column("status"), "ok"), False)
            return pc.if_else(ok, t.column("value"), pa.scalar(None, pa.float64()))

        return judge_metric_rows(con, self.config, self.name, score,
                                 f"mean of judge '{self.config.judge}' values")
