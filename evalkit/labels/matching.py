"""Labels lined up with a population of records: which records are labelled, their human
values, and the design that drew them (:class:`evalkit.estimation.LabelSet`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.estimation import LabelSet

__all__ = ["label_set"]

PROBABILITY_DESIGNS = ("census", "random", "stratified", "active")


def label_set(labels: pa.Table, record_ids: list[Any], human: Callable[[dict[str, Any]],
              float | None], sample: str | None = None, run_id: str | None = None
              ) -> tuple[LabelSet, dict[str, Any]]:
    """The labels (rows of the labels table, one judge's) of the records ``record_ids`` (the
    population, in order), and counts for ``details``. ``human`` turns a label row into the
    human value (None: unusable). Labels not drawn at random are counted as validation and
    never estimate; labels from several samples are refused unless ``sample`` picks one.
    Several labelers of one record: the mean of their values. A label of another run's output
    (its ``run_id`` is set and is not ``run_id``) is left out."""
    position = {str(r): i for i, r in enumerate(record_ids)}
    rows = [r for r in labels.to_pylist() if r["record_id"] in position
            and (r.get("run_id") is None or r["run_id"] == run_id)]
    probability = [r for r in rows if r["design"] in PROBABILITY_DESIGNS
                   and r["inclusion_prob"] is not None]
    counts = {"n_validation_labels": len(rows) - len(probability)}
    if sample is not None:
        probability = [r for r in probability if r["sample_id"] == sample]
    empty = np.zeros(0, dtype=int)
    groups = sorted({(r["sample_id"] or "", r["design"]) for r in probability})
    if len(groups) > 1 and any(d == "census" for _, d in groups) and sample is None:
        probability = [r for r in probability if r["design"] == "census"]  # exact: it wins
        groups = sorted({(r["sample_id"] or "", r["design"]) for r in probability})
    if len(groups) > 1:
        names = ", ".join(f"{s or '(no sample)'} ({d})" for s, d in groups)
        return LabelSet(empty, np.zeros(0), None, np.zeros(0), None,
                        refused=f"labels from several samples ({names}): set sample to "
                        "the one to estimate from"), counts
    if not probability:
        why = ("no label of these records was drawn at random (labels chosen another way, "
               f"{counts['n_validation_labels']} here, validate the judge but cannot "
               "estimate: draw a sample with evalkit label sample)") if rows else \
            "no labels for these records"
        return LabelSet(empty, np.zeros(0), None, np.zeros(0), None, refused=why), counts
    values: dict[int, list[float]] = {}
    first: dict[int, dict[str, Any]] = {}
    unusable = 0
    for r in probability:
        v = human(r)
        if v is None:
            unusable += 1
            continue
        i = position[r["record_id"]]
        values.setdefault(i, []).append(v)
        first.setdefault(i, r)
    counts["n_unusable_labels"] = unusable
    idx = np.array(sorted(values), dtype=int)
    y = np.array([np.mean(values[i]) for i in idx], dtype=float)
    pi = np.array([first[i]["inclusion_prob"] for i in idx], dtype=float)
    strata = np.array([str(first[i]["stratum"]) for i in idx], dtype=object)
    design = groups[0][1]
    if groups[0][0]:
        counts["sample_id"] = groups[0][0]
    counts["n_labellers"] = len({r["labeler"] for r in probability})
    return LabelSet(idx, y, design, pi, strata if design == "stratified" else None), counts
