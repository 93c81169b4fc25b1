"""``corrected``: a judge's rate or mean corrected by human labels on a random sample of the
records, with an interval that holds (prediction-powered inference and its relatives,
:mod:`evalkit.estimation`; docs/labels.md).

Per slice it writes four rows: ``<name>`` the corrected estimate (``details.method``:
``ppi++`` for a simple random sample, ``ipw`` for unequal inclusion probabilities,
``census`` when every record is labelled), ``<name>.judge`` the judge alone over every
record, ``<name>.human`` the labels alone, and ``<name>.rogan_gladen`` for verdicts (a
threshold or flag labels). Labels come from the runs directory's labels table and from
``labels_file``; only labels drawn at random estimate, the others are counted as
validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_flag_at
from evalkit.metrics._judged import judged_table
from evalkit.metrics._signals import SliceConfig, excluded_mask, index_slices, metric_row
from evalkit.plugin import Metric, Produces

__all__ = ["CorrectedConfig", "CorrectedMetric"]

_METHODS = ("ppi++", "rogan_gladen")


@dataclass(frozen=True)
class CorrectedConfig(SliceConfig):
    judge: str = "???"  # the judge (or imported score) whose rate or mean is corrected
    threshold: float | None = None  # a rate: flagged when value > threshold (flag_at); null: mean
    flag_labels: list[str] | None = None  # instead: flagged when the label is one of these
    human_threshold: float | None = None  # a human value > this is flagged; default: threshold
    flag_at: str = ">"  # a score at the threshold: ">" not flagged, ">=" flagged
    label_judge: str | None = None  # the judge name the labels answer; default: judge
    labels_file: str | None = None  # a labels file (JSONL, CSV, Parquet) to add to the runs'
    sample: str | None = None  # estimate from this label sample only (when there are several)
    methods: list[str] = field(default_factory=lambda: list(_METHODS))  # ppi++, rogan_gladen
    min_per_class: int = 5  # rogan_gladen: labels needed in each human class

    def validate(self) -> None:
        super().validate()
        bad = [m for m in self.methods if m not in _METHODS]
        if bad or not self.methods:
            raise ValueError(f"methods: {bad or '[]'}: choose from {', '.join(_METHODS)}")
        if self.threshold is not None and self.flag_labels is not None:
            raise ValueError("set threshold or flag_labels, not both")
        if self.min_per_class < 1:
            raise ValueError("min_per_class: at least 1")
        check_flag_at(self.flag_at)


class CorrectedMetric(Metric):
    """The judge-corrected rate (or mean) per slice, beside the judge-only and human-only
    ones."""

    Config = CorrectedConfig
    higher_is_better = False  # like rate: the share flagged
    thread_safe = True  # compute() reads through its cursor and the labels files only

    def __init__(self, name: str, config: CorrectedConfig, ctx: Any) -> None:
        self.name = name
        self.config = config
        self.runs_dir = getattr(ctx, "runs_dir", None)
        self.run_id = getattr(ctx, "run_id", None)
        self.higher_is_better = False if config.threshold is not None or config.flag_labels \
            else None

    def produces(self) -> Produces:
        names = [self.name, f"{self.name}.judge", f"{self.name}.human"]
        if "rogan_gladen" in self.config.methods and self._binary:
            names.append(f"{self.name}.rogan_gladen")
        return Produces(tuple(names), slice_by=tuple(self.config.slice_by))

    @property
    def _binary(self) -> bool:
        return self.config.threshold is not None or self.config.flag_labels is not None

    def compute(self, con: Any) -> list[dict[str, Any]]:
        from evalkit.estimation import slice_estimates
        from evalkit.labels import label_set
        from evalkit.labels.inputs import (
            Scoring,
            carry_labels,
            judge_values,
            load_labels,
            outputs_from,
        )

        cfg = self.config
        table = judged_table(con, cfg.judge, list(dict.fromkeys(["record_id",
                                                                 *cfg.slice_by])))
        excluded = excluded_mask(table)
        scoring = Scoring(cfg.threshold, cfg.flag_labels, cfg.flag_at, cfg.human_threshold)
        f = judge_values(table, scoring, excluded)
        labels, source_note = load_labels(cfg.label_judge or cfg.judge, self.runs_dir,
                                          cfg.labels_file)
        ids = table.column("record_id").to_pylist()
        labels = carry_labels(labels, self.run_id, outputs_from(con), self.runs_dir)
        what = (f"share of records judge '{cfg.judge}' would flag by human labels"
                if scoring.binary else f"mean of judge '{cfg.judge}' values by human labels")
        no_judge = table.column("status").null_count == table.num_rows
        rows: list[dict[str, Any]] = []
        # each slice's records by judge value, then id: the estimators' sums (and so the bits
        # of every value and bound) do not depend on the order the records were written in
        by_value = np.asarray(pc.sort_indices(pa.table({"f": f, "id": table.column(
            "record_id")}), sort_keys=[("f", "ascending"), ("id", "ascending")]))
        rank = np.empty(len(f), dtype=np.int64)
        rank[by_value] = np.arange(len(f))
        for slice_label, idx in index_slices(table, list(cfg.slice_by)):
            usable = idx[~np.isnan(f[idx])]
            usable = usable[np.argsort(rank[usable], kind="stable")]
            counts = {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum()),
                      "n_judged": len(usable),
                      "n_unscored": int((~excluded[idx]).sum()) - len(usable)}
            lset, extra = label_set(labels, [ids[i] for i in usable], scoring.human(),
                                    cfg.sample, self.run_id)
            if no_judge:
                lset.refused = f"no judgments from judge '{cfg.judge}' in this run"
            ests = slice_estimates(f[usable], lset, cfg.confidence, tuple(cfg.methods),
                                   scoring.binary, cfg.min_per_class, cfg.n_boot, cfg.seed)
            for key, est in ests.items():
                metric = self.name if key == "corrected" else f"{self.name}.{key}"
                details = {"what": what, "method": est.method, **extra, **source_note,
                           **est.details}
                rows.append(metric_row(metric, slice_label, est.value, (est.low, est.high),
                                       **counts, details=details, undefined=est.undefined))
        return rows
