"""``agreement``: how far two judges (or a judge and human labels) agree, over the records
both scored: Pearson, Spearman, Cohen's kappa, Krippendorff's alpha (interval and nominal),
percent agreement and n, each with a bootstrap CI and the reason when undefined."""

from __future__ import annotations

from typing import Any

from evalkit.metrics import _paired
from evalkit.metrics._pairs import PairConfig, load_pairs, pair_slices
from evalkit.metrics._signals import metric_row

# statistic -> (function, whether it reads the scores or the thresholded 0/1, what it is)
STATISTICS: dict[str, tuple[_paired.Batch, bool, str]] = {
    "pearson": (_paired.pearson, False, "Pearson's r of the scores"),
    "spearman": (_paired.spearman, False, "Spearman's rho of the scores"),
    "kappa": (_paired.cohen_kappa, True, "Cohen's kappa after the thresholds"),
    "alpha_interval": (_paired.alpha_interval, False,
                       "Krippendorff's alpha, interval metric, on the scores"),
    "alpha_nominal": (_paired.alpha_nominal, True,
                      "Krippendorff's alpha, nominal metric, after the thresholds"),
    "percent_agreement": (_paired.percent_agreement, True,
                          "share of pairs on the same side of the thresholds"),
}


class AgreementMetric:
    """Rows ``<name>.<statistic>`` per slice, plus ``<name>.n`` (the number of pairs). A
    statistic undefined on its input (constant scores, fewer than two pairs) has a null value
    and ``details.undefined`` saying why."""

    Config = PairConfig
    higher_is_better = True

    def __init__(self, name: str, config: PairConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        pairs = load_pairs(con, cfg)
        rows: list[dict[str, Any]] = []
        for label, _idx, both, meta in pair_slices(pairs, cfg):
            scores = [pairs.a[both], pairs.b[both]]
            binary = [pairs.a_bin[both], pairs.b_bin[both]]
            values = {stat: _paired.value(stat, fn, *(binary if is_bin else scores))
                      for stat, (fn, is_bin, _) in STATISTICS.items()}

            def on(fn: _paired.Batch, is_bin: bool) -> _paired.Batch:
                return lambda a, b, x, y: fn(x, y) if is_bin else fn(a, b)

            cis = _paired.bootstrap(
                [*scores, *binary],
                {stat: on(fn, is_bin) for stat, (fn, is_bin, _) in STATISTICS.items()
                 if values[stat][0] is not None},
                cfg.n_boot, cfg.seed, cfg.confidence)
            base = {**meta["info"], "threshold": cfg.threshold,
                    "threshold_b": cfg.threshold if cfg.threshold_b is None
                    else cfg.threshold_b, "flip_b": cfg.flip_b}
            if len(both):
                base.update(mean_a=float(scores[0].mean()), mean_b=float(scores[1].mean()))
            for stat, (_, _, what) in STATISTICS.items():
                value, why = values[stat]
                rows.append(metric_row(f"{self.name}.{stat}", label, value,
                                       cis.get(stat, (None, None)), **meta["counts"],
                                       details={**base, "what": what},
                                       undefined=pairs.undefined or why))
            rows.append(metric_row(f"{self.name}.n", label, float(len(both)), (None, None),
                                   **meta["counts"],
                                   details={**base, "what": "records both scored"}))
        return rows
