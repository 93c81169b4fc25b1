"""What a corrected estimate is made of, for the ``corrected`` metric and ``evalkit compare``
alike: the judge's value (or verdict) per record, the human value of a label row, and the
labels of a judge from the runs directory and a labels file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["Scoring", "carry_labels", "judge_values", "load_labels", "outputs_from"]


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


def carry_labels(labels: pa.Table, run_id: str | None,
                 outputs: Callable[[list[str]], dict[str, Any]],
                 runs_dir: Path | None) -> pa.Table:
    """The labels that judge this run's outputs. A label naming another run judged that
    run's output: it follows its record here when this run's output is the same text (a
    rerun with another judge, or the same system on the same inputs), and is then marked as
    this run's; otherwise it is left out. Unscoped labels pass as they are. ``outputs``
    gives this run's output of the record ids it is asked for."""
    import pyarrow.compute as pc

    other = labels.filter(pc.and_(pc.is_valid(labels.column("run_id")),
                                  pc.not_equal(labels.column("run_id"), run_id or "")))
    if not other.num_rows:
        return labels
    keep = labels.filter(pc.or_(pc.is_null(labels.column("run_id")),
                                pc.equal(labels.column("run_id"), run_id or "")))
    rows = other.to_pylist()
    mine = outputs([r["record_id"] for r in rows])
    carried = []
    for source_run in sorted({r["run_id"] for r in rows}):
        theirs = _outputs_of(runs_dir, source_run,
                             [r["record_id"] for r in rows if r["run_id"] == source_run])
        for r in rows:
            if r["run_id"] == source_run and r["record_id"] in mine and \
                    r["record_id"] in theirs and theirs[r["record_id"]] == mine[r["record_id"]]:
                carried.append({**r, "run_id": run_id})
    if not carried:
        return keep
    return pa.concat_tables([keep, pa.Table.from_pylist(carried, schema=labels.schema)])


def _outputs_of(runs_dir: Path | None, run_id: str, ids: list[str]) -> dict[str, Any]:
    """``record_id -> output`` of ``ids`` in the finished run ``run_id`` under ``runs_dir``
    (empty when there is no such run)."""
    import pyarrow.parquet as pq

    if runs_dir is None:
        return {}
    found = sorted(Path(runs_dir).glob(f"*/{run_id}/records.parquet"))
    if len(found) != 1 or "/" in run_id or run_id in ("", ".", ".."):
        return {}
    table = pq.read_table(found[0], columns=["record_id", "output"],
                          filters=[("record_id", "in", list(set(ids)))])
    return dict(zip(table.column("record_id").to_pylist(), table.column("output").to_pylist(),
                    strict=True))


def outputs_from(con: Any) -> Callable[[list[str]], dict[str, Any]]:
    """:func:`carry_labels`'s ``outputs`` over a run connection's ``records``."""
    def outputs(ids: list[str]) -> dict[str, Any]:
        rows = con.execute("SELECT record_id, output FROM records WHERE record_id IN "
                           "(SELECT unnest(?))", [list(set(ids))]).fetchall()
        return dict(rows)
    return outputs
