"""``mean``: the mean of a judge's values, filtered and raw side by side."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._judged import JudgeMetricConfig, judge_metric_rows
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
        """The filtered value, and with ``raw`` the raw one and the filters' effect."""
        extra = (f"{self.name}.raw", f"{self.name}.filter_effect") if self.config.raw else ()
        return Produces((self.name, *extra), slice_by=tuple(self.config.slice_by))

    def cursor_group(self) -> tuple[str, ...] | None:
        """Metrics of one judge and slices share a cursor, hence one judged table."""
        if self.config.judge is None:
            return None
        return ("judged", self.config.judge, *self.config.slice_by)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        def score(t: pa.Table) -> pa.Array:
            ok = pc.fill_null(pc.equal(t.column("status"), "ok"), False)
            return pc.if_else(ok, t.column("value"), pa.scalar(None, pa.float64()))

        return judge_metric_rows(con, self.config, self.name, score,
                                 f"mean of judge '{self.config.judge}' values")
