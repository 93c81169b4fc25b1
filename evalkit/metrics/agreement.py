"""``agreement``: how far two judges (or a judge and human labels) agree, over the records
both scored: Pearson, Spearman, Cohen's kappa, Krippendorff's alpha (interval and nominal),
percent agreement and n, each with a bootstrap CI and the reason when undefined."""

from __future__ import annotations

from typing import Any

import numpy as np

from evalkit.metrics import _pair_statistics as stats
from evalkit.metrics._intervals import canonical
from evalkit.metrics._rater_pairs import PairConfig, load_pairs, pair_slices
from evalkit.metrics._signals import metric_row
from evalkit.metrics._stats import mean_of
from evalkit.plugin import Metric, Produces

__all__ = ["STATISTICS", "AgreementMetric"]

# statistic -> (function, what it reads, what it is); it reads the scores, the thresholded
# 0/1 values, or the scores' codes (distinct-value indices, for ranks)
STATISTICS: dict[str, tuple[stats.Batch | None, str, str]] = {
    "pearson": (stats.pearson, "scores", "Pearson's r of the scores"),
    "spearman": (None, "codes", "Spearman's rho of the scores"),
    "kappa": (stats.cohen_kappa, "binary", "Cohen's kappa after the thresholds"),
    "alpha_interval": (stats.alpha_interval, "scores",
                       "Krippendorff's alpha, interval metric, on the scores"),
    "alpha_nominal": (stats.alpha_nominal, "binary",
                      "Krippendorff's alpha, nominal metric, after the thresholds"),
    "percent_agreement": (stats.percent_agreement, "binary",
                          "share of pairs on the same side of the thresholds"),
}
_COLUMNS = {"scores": (0, 1), "binary": (2, 3), "codes": (4, 5)}

_WHOLE_RANGE_N = 3
_WHOLE_RANGE = "whole range (n <= 3: nothing bounds a correlation)"


class AgreementMetric(Metric):
    """Rows ``<name>.<statistic>`` per slice, plus ``<name>.n`` (the number of pairs). A
    statistic undefined on its input (constant scores, fewer than two pairs) has a null value
    and ``details.undefined`` saying why."""

    Config = PairConfig
    higher_is_better = True
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: PairConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        """One name per statistic, and the count of records both judges scored."""
        return Produces((*(f"{self.name}.{s}" for s in STATISTICS), f"{self.name}.n"),
                        slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        pairs = load_pairs(con, cfg)
        rows: list[dict[str, Any]] = []
        ca, ka = stats.codes(np.nan_to_num(pairs.a))
        cb, kb = stats.codes(np.nan_to_num(pairs.b))

        def spearman(c_a: np.ndarray, c_b: np.ndarray) -> np.ndarray:
            return stats.spearman_codes(c_a.astype(np.int64), c_b.astype(np.int64), ka, kb)

        fns = {stat: fn or spearman for stat, (fn, _, _) in STATISTICS.items()}
        for label, _idx, both, meta in pair_slices(pairs, cfg):
            # in canonical order: values and intervals depend on the pairs, not on the order
            # the records came in (a merge of shards gives the same bits)
            cols = canonical([pairs.a[both], pairs.b[both], pairs.a_bin[both],
                              pairs.b_bin[both], ca[both].astype(float),
                              cb[both].astype(float)])
            values = {stat: stats.value(stat, fns[stat],
                                          *(cols[i] for i in _COLUMNS[reads]))
                      for stat, (_, reads, _) in STATISTICS.items()}
            if values["spearman"][0] is None and len(both):  # say why in values, not codes
                values["spearman"] = (None, stats.why_undefined("spearman", *cols[:2]))

            def on(stat: str, reads: str) -> stats.Batch:
                i, j = _COLUMNS[reads]
                return lambda *c: fns[stat](c[i], c[j])

            cis = stats.intervals(
                cols, {stat: on(stat, reads) for stat, (_, reads, _) in STATISTICS.items()
                       if values[stat][0] is not None}, cols[2], cols[3],
                cfg.n_boot, cfg.seed, cfg.confidence)
            # two pairs always correlate ±1 and three barely less: nothing bounds r there
            # (scipy's pearsonr(...).confidence_interval() is [-1, 1]), and the bootstrap
            # collapsed to [1, 1] at two pairs
            whole = {stat for stat in ("pearson", "spearman") if cfg.n_boot > 0
                     and len(both) <= _WHOLE_RANGE_N and values[stat][0] is not None}
            cis.update({stat: (-1.0, 1.0) for stat in whole})
            scores = cols[:2]
            base = {**meta["info"], "threshold": cfg.threshold,
                    "threshold_b": cfg.threshold if cfg.threshold_b is None
                    else cfg.threshold_b, "flip_b": cfg.flip_b}
            if len(both):
                base.update(mean_a=mean_of(scores[0]), mean_b=mean_of(scores[1]))
            for stat, (_, _, what) in STATISTICS.items():
                value, why = values[stat]
                ci = cis.get(stat, (None, None))
                how = ({"ci_method": _WHOLE_RANGE} if stat in whole else
                       stats.interval_details(stat, ci, value, len(both), cfg.n_boot))
                rows.append(metric_row(f"{self.name}.{stat}", label, value, ci,
                                       **meta["counts"],
                                       details={**base, "what": what, **how},
                                       undefined=pairs.undefined or why))
            rows.append(metric_row(f"{self.name}.n", label, float(len(both)), (None, None),
                                   **meta["counts"],
                                   details={**base, "what": "records both scored"}))
        return rows
