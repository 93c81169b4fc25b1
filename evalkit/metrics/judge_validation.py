"""``judge_validation``: a judge against human labels (or a reference judge) as a binary
classifier: accuracy, precision, recall, F1 and Cohen's kappa, with the confusion matrix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.metrics import _pair_statistics as stats
from evalkit.metrics._rater_pairs import PairConfig, load_pairs, pair_slices
from evalkit.metrics._signals import metric_row
from evalkit.plugin import Metric, Produces

__all__ = ["STATISTICS", "JudgeValidationConfig", "JudgeValidationMetric"]


@dataclass(frozen=True)
class JudgeValidationConfig(PairConfig):
    human_label: bool = True  # the truth: records.human_label (false + judge_b: another judge)


STATISTICS: dict[str, tuple[stats.Batch, str]] = {
    "accuracy": (stats.percent_agreement,
                 "share of records where the judge's verdict matches the truth"),
    "precision": (stats.precision, "of the records the judge flagged (1), the share the "
                  "truth flags"),
    "recall": (stats.recall, "of the records the truth flags (1), the share the judge "
               "flagged"),
    "f1": (stats.f1, "harmonic mean of precision and recall"),
    "kappa": (stats.cohen_kappa, "Cohen's kappa between verdict and truth"),
}


class JudgeValidationMetric(Metric):
    """Rows ``<name>.accuracy|precision|recall|f1|kappa`` per slice. Both sides are made
    binary with the thresholds (1 = the positive class, e.g. "hallucinated"); the confusion
    matrix (tp, fp, fn, tn) is in every row's ``details``."""

    Config = JudgeValidationConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: JudgeValidationConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        """One name per statistic."""
        return Produces(tuple(f"{self.name}.{s}" for s in STATISTICS),
                        slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        pairs = load_pairs(con, cfg)
        rows: list[dict[str, Any]] = []
        for label, _idx, both, meta in pair_slices(pairs, cfg):
            pred, truth = pairs.a_bin[both], pairs.b_bin[both]
            values = {stat: stats.value(stat, fn, pred, truth)
                      for stat, (fn, _) in STATISTICS.items()}
            cis = stats.intervals([pred, truth],
                                  {stat: fn for stat, (fn, _) in STATISTICS.items()
                                   if values[stat][0] is not None}, pred, truth,
                                  cfg.n_boot, cfg.seed, cfg.confidence)
            details = {**meta["info"], "threshold": cfg.threshold,
                       "threshold_b": cfg.threshold if cfg.threshold_b is None
                       else cfg.threshold_b,
                       "confusion": stats.confusion(pred, truth),
                       "positive_rate_judge": float(pred.mean()) if len(pred) else None,
                       "positive_rate_truth": float(truth.mean()) if len(truth) else None}
            for stat, (_, what) in STATISTICS.items():
                value, why = values[stat]
                ci = cis.get(stat, (None, None))
                how = stats.interval_details(stat, ci, value, len(pred), cfg.n_boot)
                rows.append(metric_row(f"{self.name}.{stat}", label, value, ci,
                                       **meta["counts"],
                                       details={**details, "what": what, **how},
                                       undefined=pairs.undefined or why))
        return rows
