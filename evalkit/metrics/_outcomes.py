"""Per-record execution outcomes (success 1, failure 0, unusable NaN with the reason), from a
record column or a judge's verdict. Shared by ``task_completion`` and ``cost_per_success``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.checks import check_flag_at
from evalkit.metrics._signals import (
    SignalSpec,
    SliceConfig,
    check_spec,
    fetch,
    numbers,
    parse_spec,
)


def _outcome_map() -> dict[str, float]:
    return {"success": 1.0, "failure": 0.0}


@dataclass(frozen=True)
class OutcomeConfig(SliceConfig):
    outcome: str = "outcome"  # a record column, or judge:NAME[:value|passed|label]
    outcome_map: dict[str, float] = field(default_factory=_outcome_map)  # text -> 1 success, 0 not
    threshold: float | None = None  # numeric outcomes: success when value > threshold (flag_at)
    flag_at: str = ">"  # at the threshold exactly: ">" failure, ">=" success (top-level flag_at)

    def validate(self) -> None:
        super().validate()
        check_spec(self.outcome, "outcome")
        check_flag_at(self.flag_at)


def outcomes(con: Any, cfg: OutcomeConfig, columns: list[str] | None = None
             ) -> tuple[pa.Table, np.ndarray, list[str | None], SignalSpec]:
    """The records table, per-record success (1/0, NaN unusable), why unusable, and the spec."""
    spec = parse_spec(cfg.outcome, "outcome")
    table = fetch(con, {"outcome": spec}, [*cfg.slice_by, *(columns or [])])
    success, why = numbers(table, "outcome", spec, cfg.outcome_map, cfg.threshold,
                           cfg.flag_at)
    # an outcome is success or not: any other number is unusable, never a partial success
    off = ~np.isnan(success) & ~np.isin(success, [0.0, 1.0])
    for i in np.flatnonzero(off):
        why[i] = (f"{spec.describe()} is {success[i]:g}, not 1 (success) or 0; set "
                  "threshold or outcome_map")
    success[off] = np.nan
    return table, success, why, spec
