"""``rate``: the share of scored records a judge flags, filtered and raw side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.metrics._judged import JudgeMetricConfig, judge_metric_rows


@dataclass(frozen=True)
class RateConfig(JudgeMetricConfig):
    threshold: float | None = None  # flagged when value >= threshold; null: when passed is false


class RateMetric:
    """Share of scored records flagged: ``value >= threshold`` or, without a threshold,
    ``passed = false``. Unscored records (errors, skips) stay out of the denominator."""

    Config = RateConfig
    higher_is_better = False

    def __init__(self, name: str, config: RateConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config

        def score(t: pa.Table) -> pa.Array:
            ok = pc.fill_null(pc.equal(t.column("status"), "ok"), False)
            if cfg.threshold is None:
                flag = pc.invert(t.column("passed"))
            else:
                flag = pc.greater_equal(t.column("value"), cfg.threshold)
            flag = pc.cast(flag, pa.float64())
            return pc.if_else(ok, flag, pa.scalar(None, pa.float64()))

        what = (f"share of judge '{cfg.judge}' values >= {cfg.threshold}"
                if cfg.threshold is not None else f"share of judge '{cfg.judge}' not passed")
        return judge_metric_rows(con, cfg, self.name, score, what)
