"""``rate``: the share of scored records a judge flags, filtered and raw side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_flag_at, check_one_of
from evalkit.metrics._judged import (
    JudgeMetricConfig,
    judge_metric_rows,
    judged_cursor_group,
    value_produces,
)
from evalkit.plugin import Metric, Produces

__all__ = ["COUNTS", "RateConfig", "RateMetric", "flags"]

COUNTS = ("flagged", "passed")


@dataclass(frozen=True)
class RateConfig(JudgeMetricConfig):
    threshold: float | None = None  # flagged when value > threshold (flag_at); null: passed false
    labels: list[str] | None = None  # instead: flagged when the judgment's label is one of these
    count: str = "flagged"  # flagged: the share flagged; passed: the share not flagged
    flag_at: str = ">"  # a score at the threshold: ">" not flagged, ">=" flagged

    def validate(self) -> None:
        super().validate()
        if self.labels is not None and self.threshold is not None:
            raise ValueError("set threshold or labels, not both")
        if self.labels is not None and not self.labels:
            raise ValueError("labels: an empty list flags nothing; leave it null")
        check_one_of(self.count, COUNTS, "count")
        check_flag_at(self.flag_at)


def flags(table: pa.Table, cfg: RateConfig) -> pa.Array:
    """Per row of a judged ``table`` (``status``, ``value``, ``passed``, ``label``): 1.0 when
    the rate counts it (flagged; with ``count: passed``, not flagged), 0.0 when not, null when
    the judgment is unusable. ``evalkit compare`` pairs these per record (McNemar's test)."""
    ok = pc.fill_null(pc.equal(table.column("status"), "ok"), False)
    if cfg.labels is not None:
        label = table.column("label")
        flag = pc.if_else(pc.is_null(label), pa.scalar(None, pa.bool_()),
                          pc.is_in(label, pa.array(list(cfg.labels), pa.string())))
    elif cfg.threshold is None:
        flag = pc.invert(table.column("passed"))
    elif cfg.flag_at == ">":
        flag = pc.greater(table.column("value"), cfg.threshold)
    else:
        flag = pc.greater_equal(table.column("value"), cfg.threshold)
    if cfg.count == "passed":
        flag = pc.invert(flag)
    return pc.if_else(ok, pc.cast(flag, pa.float64()), pa.scalar(None, pa.float64()))


class RateMetric(Metric):
    """Share of scored records flagged: ``value > threshold`` (``>=`` with ``flag_at: ">="``),
    a label in ``labels``, or (by default) ``passed = false``; with ``count: passed``, the
    share not flagged (a pass rate, an accuracy). Unscored records (errors, skips, no
    verdict) stay out of the denominator."""

    Config = RateConfig
    higher_is_better = False  # flagged is bad; with count: passed, the instance says True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: RateConfig, ctx: object) -> None:
        self.name = name
        self.config = config
        self.higher_is_better = config.count == "passed"

    def produces(self) -> Produces:
        return value_produces(self.name, self.config)

    def cursor_group(self) -> tuple[str, ...] | None:
        return judged_cursor_group(self.config)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        passed = cfg.count == "passed"

        if cfg.labels is not None:
            rule = f"labels in {list(cfg.labels)}"
        elif cfg.threshold is not None:
            rule = f"values {cfg.flag_at} {cfg.threshold}"
        else:
            rule = "passed = false"
        what = (f"share of judge '{cfg.judge}' judgments not flagged (flagged: {rule})"
                if passed else f"share of judge '{cfg.judge}' judgments flagged ({rule})")
        return judge_metric_rows(con, cfg, self.name, lambda t: flags(t, cfg), what)
