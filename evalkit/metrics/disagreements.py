"""``disagreements``: the records where two judges (or a judge and a human) disagree, written
as a review queue (Parquet and CSV, in the run directory) with both verdicts and their
explanations, for a person to settle."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.metrics._rater_pairs import PairConfig, load_pairs, pair_slices
from evalkit.metrics._signals import metric_row
from evalkit.metrics._stats import bootstrap_ci
from evalkit.plugin import Metric
from evalkit.results.writer import atomic_path, write_parquet

__all__ = ["DisagreementsConfig", "DisagreementsMetric"]

# record columns copied into the queue so a reviewer sees what was judged
_RECORD_COLUMNS = ["model", "input", "output", "context", "reference", "human_label"]


@dataclass(frozen=True)
class DisagreementsConfig(PairConfig):
    difference: float | None = None  # disagree when |a - b| > difference; null: the sides of
    # the threshold differ (a >= threshold vs b >= threshold_b)
    max_rows: int | None = None  # keep only the largest disagreements in the queue (null: all)
    csv_formulas: bool = False  # write CSV text starting with = + - @ tab or CR as it is
    # (false: such a cell gets a leading ' so a spreadsheet does not run it)

    def validate(self) -> None:
        super().validate()
        if self.difference is not None and self.difference < 0:
            raise ValueError(f"difference: {self.difference} is negative")
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError("max_rows: must be at least 1 (or null for every row)")


class DisagreementsMetric(Metric):
    """Row ``<name>`` per slice: the share of paired records that disagree (``details`` has
    the count and the queue's paths). The queue, ``review/<name>.parquet`` and ``.csv`` in the
    run directory, lists every disagreeing record, largest difference first."""

    Config = DisagreementsConfig
    higher_is_better = False
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: DisagreementsConfig, ctx: Any) -> None:
        self.name = name
        self.config = config
        self.review_dir = Path(ctx.run_dir) / "review"

    def _disagree(self, a: np.ndarray, b: np.ndarray, a_bin: np.ndarray,
                  b_bin: np.ndarray) -> np.ndarray:
        if self.config.difference is None:
            return a_bin != b_bin
        return np.abs(a - b) > self.config.difference

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        pairs = load_pairs(con, cfg, _RECORD_COLUMNS)
        flags = self._disagree(pairs.a, pairs.b, pairs.a_bin, pairs.b_bin)
        rule = (f"|a - b| > {cfg.difference}" if cfg.difference is not None else
                "a and b on different sides of their thresholds")
        rows: list[dict[str, Any]] = []
        queue: np.ndarray | None = None
        for label, _idx, both, meta in pair_slices(pairs, cfg):
            if label == "all":
                queue = both[flags[both]]
            share = flags[both].astype(float)
            value = float(share.mean()) if len(share) else None
            ci = bootstrap_ci(share, n_boot=cfg.n_boot, seed=cfg.seed,
                              confidence=cfg.confidence)
            details = {**meta["info"], "rule": rule, "n_disagree": int(share.sum()),
                       "what": "share of records both scored on which they disagree",
                       "review_queue": [str(p) for p in self._paths()],
                       **({"ci_method": "wilson"} if ci[0] is not None else {})}
            rows.append(metric_row(self.name, label, value, ci, **meta["counts"],
                                   details=details, undefined=pairs.undefined))
        self._write_queue(pairs, queue if queue is not None else np.array([], dtype=int))
        return rows

    def _paths(self) -> tuple[Path, Path]:
        return (self.review_dir / f"{self.name}.parquet", self.review_dir / f"{self.name}.csv")

    def _write_queue(self, pairs: Any, idx: np.ndarray) -> None:
        cfg = self.config
        diff = np.abs(pairs.a[idx] - pairs.b[idx])
        order = np.argsort(-diff, kind="stable")
        if cfg.max_rows is not None:
            order = order[:cfg.max_rows]
        idx, diff = idx[order], diff[order]
        take = pa.array(idx, pa.int64())
        t = pairs.table.take(take)
        cols: dict[str, Any] = {"record_id": t.column("record_id")}
        for c in _RECORD_COLUMNS:
            cols[c] = t.column(c)
        for side, who in (("a", cfg.judge_a), ("b", cfg.b_name)):
            cols[f"{side}_judge"] = pa.array([who] * len(idx), pa.string())
            cols[f"{side}_score"] = pa.array(getattr(pairs, side)[idx], pa.float64())
            for f in ("value", "label", "passed", "explanation"):
                name = f"{side}__{f}"
                if name in t.column_names:
                    cols[f"{side}_{f}"] = t.column(name)
        cols["difference"] = pa.array(diff, pa.float64())
        table = pa.table(cols)
        self.review_dir.mkdir(parents=True, exist_ok=True)
        parquet_path, csv_path = self._paths()
        write_parquet(table, parquet_path)
        import pyarrow.csv as pacsv

        flat = table.set_column(table.schema.get_field_index("context"), "context",
                                pa.array([None if v is None else " ||| ".join(v)
                                          for v in table.column("context").to_pylist()],
                                         pa.string()))
        if not self.config.csv_formulas:  # the queue is opened in a spreadsheet: data
            from evalkit.safetext import csv_cell  # must not become a formula

            for k, col in enumerate(flat.columns):
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                    flat = flat.set_column(k, flat.schema.field(k), pa.array(
                        [csv_cell(v) for v in col.to_pylist()], col.type))
        with atomic_path(csv_path) as tmp:
            pacsv.write_csv(flat, tmp)
