"""What a corrected estimate is made of, for the ``corrected`` metric and ``evalkit compare``
alike: the judge's value (or verdict) per record, the human value of a label row, and the
labels of a judge from the runs directory and a labels file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["Scoring", "judge_values", "load_labels"]


class Scoring:
    """How a judge's verdict and a human label become numbers: a 0/1 verdict past
    ``threshold`` (``flag_at``) or in ``flag_labels``, else the value itself."""

    def __init__(self, threshold: float | None, flag_labels: list[str] | None,
                 flag_at: str = ">", human_threshold: float | None = None) -> None:
        self.threshold, self.flag_labels, self.flag_at = threshold, flag_labels, flag_at
        self.human_threshold = threshold if human_threshold is None else human_threshold

    @property
    def binary(self) -> bool:
        return self.threshold is not None or self.flag_labels is not None

    def score(self, value: float | None, label: str | None,
              threshold: float | None) -> float | None:
        if self.flag_labels is not None:
            return None if label is None else float(label in self.flag_labels)
        if value is None or np.isnan(value):
            return None
        if threshold is None:
            return float(value)
        return float(value > threshold if self.flag_at == ">" else value >= threshold)

    def human(self) -> Callable[[dict[str, Any]], float | None]:
        """A label row's human value."""
        return lambda r: self.score(r["value"], r["label"], self.human_threshold)


def judge_values(table: pa.Table, scoring: Scoring, excluded: np.ndarray) -> np.ndarray:
    """Per record of a judged table (:func:`evalkit.metrics._judged.judged_table`): the
    judge's number, NaN where the record is excluded or has no usable verdict. A pass/fail
    judge with neither value nor label counts as flagged when it did not pass."""
    f = np.full(table.num_rows, np.nan)
    cols = zip(table.column("status").to_pylist(), table.column("value").to_pylist(),
               table.column("label").to_pylist(), table.column("passed").to_pylist(),
               strict=True)
    for i, (s, v, lab, p) in enumerate(cols):
        if s != "ok" or excluded[i]:
            continue
        if v is None and lab is None and p is not None and not scoring.binary:
            f[i] = float(not p)
            continue
        got = scoring.score(v, lab, scoring.threshold)
        if got is not None:
            f[i] = got
    return f


def load_labels(judge: str, runs_dir: Path | None, labels_file: str | None
                ) -> tuple[pa.Table, dict[str, Any]]:
    """The labels of ``judge``: the runs directory's and ``labels_file``'s (whose rows
    without a judge answer this one), and a note for ``details``."""
    from evalkit.labels.importing import read_label_file
    from evalkit.labels.store import LABELS, read_labels

    parts = []
    if runs_dir is not None:
        parts.append(read_labels(runs_dir, judge))
    note: dict[str, Any] = {}
    if labels_file:
        rows = []
        for _where, row in read_label_file(Path(labels_file)):
            if row.get("judge", judge) != judge or "__error__" in row:
                continue
            r = {k: row.get(k) for k in LABELS.names if k in row}
            r.update(judge=judge, record_id=str(row.get("record_id")))
            r.pop("labelled_at", None)
            if r.get("value") is not None:
                r["value"] = float(r["value"])
            if r.get("design") == "census" and r.get("inclusion_prob") is None:
                r["inclusion_prob"] = 1.0
            rows.append(r)
        parts.append(pa.Table.from_pylist(rows, schema=LABELS))
        note["labels_file"] = Path(labels_file).name
    return (pa.concat_tables(parts) if parts else LABELS.empty_table()), note
