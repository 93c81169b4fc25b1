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
from pathlib import Path
from typing import Any

import numpy as np

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

    def _flag(self, value: float | None, label: str | None, threshold: float | None
              ) -> float | None:
        cfg = self.config
        if cfg.flag_labels is not None:
            return None if label is None else float(label in cfg.flag_labels)
        if value is None or np.isnan(value):
            return None
        if threshold is None:
            return float(value)
        return float(value > threshold if cfg.flag_at == ">" else value >= threshold)

    def compute(self, con: Any) -> list[dict[str, Any]]:
        from evalkit.estimation import slice_estimates
        from evalkit.labels import label_set

        cfg = self.config
        table = judged_table(con, cfg.judge, list(dict.fromkeys(["record_id",
                                                                 *cfg.slice_by])))
        excluded = excluded_mask(table)
        status = table.column("status").to_pylist()
        values = table.column("value").to_pylist()
        labels_ = table.column("label").to_pylist()
        passed = table.column("passed").to_pylist()
        f = np.full(table.num_rows, np.nan)
        for i, (s, v, lab, p) in enumerate(zip(status, values, labels_, passed, strict=False)):
            if s != "ok" or excluded[i]:
                continue
            if v is None and lab is None and p is not None and cfg.threshold is None \
                    and cfg.flag_labels is None:
                f[i] = float(not p)  # a pass/fail judge: flagged when it did not pass
                continue
            flag = self._flag(v, lab, cfg.threshold)
            if flag is not None:
                f[i] = flag
        human_cut = cfg.threshold if cfg.human_threshold is None else cfg.human_threshold
        labels, source_note = self._labels()
        ids = table.column("record_id").to_pylist()
        binary = self._binary
        rows: list[dict[str, Any]] = []
        what = (f"share of records judge '{cfg.judge}' would flag by human labels"
                if binary else f"mean of judge '{cfg.judge}' values by human labels")
        no_judge = all(s is None for s in status)
        for slice_label, idx in index_slices(table, list(cfg.slice_by)):
            usable = idx[~np.isnan(f[idx])]
            counts = {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum()),
                      "n_judged": len(usable),
                      "n_unscored": int((~excluded[idx]).sum()) - len(usable)}
            lset, extra = label_set(labels, [ids[i] for i in usable],
                                    lambda r: self._flag(r["value"], r["label"], human_cut),
                                    cfg.sample)
            if no_judge:
                lset.refused = f"no judgments from judge '{cfg.judge}' in this run"
            ests = slice_estimates(f[usable], lset, cfg.confidence, tuple(cfg.methods),
                                   binary, cfg.min_per_class, cfg.n_boot, cfg.seed)
            for key, est in ests.items():
                metric = self.name if key == "corrected" else f"{self.name}.{key}"
                details = {"what": what, "method": est.method, **extra, **source_note,
                           **est.details}
                rows.append(metric_row(metric, slice_label, est.value, (est.low, est.high),
                                       **counts, details=details, undefined=est.undefined))
        return rows

    def _labels(self) -> tuple[Any, dict[str, Any]]:
        """The labels of the judge: the runs directory's and ``labels_file``'s."""
        import pyarrow as pa

        from evalkit.labels import LABELS, read_label_file, read_labels

        cfg = self.config
        judge = cfg.label_judge or cfg.judge
        parts = []
        if self.runs_dir is not None:
            parts.append(read_labels(self.runs_dir, judge))
        note: dict[str, Any] = {}
        if cfg.labels_file:
            rows = []
            for _where, row in read_label_file(Path(cfg.labels_file)):
                if row.get("judge", judge) != judge or "__error__" in row:
                    continue
                rows.append({k: row.get(k) for k in LABELS.names if k in row} |
                            {"judge": judge, "record_id": str(row.get("record_id"))})
            for r in rows:
                if r.get("value") is not None:
                    r["value"] = float(r["value"])
                if r.get("design") == "census" and r.get("inclusion_prob") is None:
                    r["inclusion_prob"] = 1.0
                r.pop("labelled_at", None)
            parts.append(pa.Table.from_pylist(rows, schema=LABELS))
            note["labels_file"] = Path(cfg.labels_file).name
        return (pa.concat_tables(parts) if parts else LABELS.empty_table()), note
