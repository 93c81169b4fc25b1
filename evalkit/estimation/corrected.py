"""Which estimator a set of labels calls for, and all the estimates of one slice: what the
``corrected`` metric, ``evalkit compare`` and the API share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalkit.estimation._estimate import Estimate
from evalkit.estimation.classic import human_mean, judge_mean
from evalkit.estimation.ipw import ipw_mean
from evalkit.estimation.ppi import census_mean, ppi_mean
from evalkit.estimation.rogan_gladen import rogan_gladen

__all__ = ["METHODS", "LabelSet", "slice_estimates"]

METHODS = ("ppi++", "rogan_gladen")
"""Methods a config may ask for: ``ppi++`` (its IPW form for unequal probabilities) and
``rogan_gladen`` (binary verdicts, simple random samples)."""


@dataclass
class LabelSet:
    """The labelled records of a population of ``N`` (their indices into the judge's values),
    with what their design says: ``design`` (census, random, stratified, active), each
    record's inclusion probability and stratum."""

    idx: np.ndarray
    y: np.ndarray
    design: str | None
    pi: np.ndarray
    strata: np.ndarray | None
    refused: str | None = None  # why these labels cannot estimate (then idx may be empty)


def slice_estimates(f: np.ndarray, labels: LabelSet, confidence: float, methods: tuple[str, ...],
                    binary: bool, min_per_class: int = 5, n_boot: int = 1000,
                    seed: int = 0) -> dict[str, Estimate]:
    """``judge``, ``human`` and ``corrected`` (and ``rogan_gladen`` when asked for and the
    values are verdicts) estimates of the mean human value over the ``f`` records."""
    out = {"judge": judge_mean(f, confidence, n_boot, seed)}
    details = {"N": len(f), "n_labelled": len(labels.idx), "design": labels.design}
    if labels.refused or not len(labels.idx):
        why = labels.refused or "no labelled record in this slice"
        out["human"] = Estimate.refused("human", why, **details)
        out["corrected"] = Estimate.refused("ppi++", why, **details)
        if "rogan_gladen" in methods and binary:
            out["rogan_gladen"] = Estimate.refused("rogan_gladen", why, **details)
        return out
    design, y = labels.design, labels.y
    labelled = np.zeros(len(f), dtype=bool)
    labelled[labels.idx] = True
    if labelled.all():
        out["human"] = census_mean(y, "human")
        out["corrected"] = census_mean(y, "census")
    elif design in ("random", "census"):
        out["human"] = human_mean(y, confidence, n_boot, seed)
        out["corrected"] = ppi_mean(y, f[labels.idx], f[~labelled], confidence)
    else:
        strata = labels.strata if design == "stratified" else None
        out["human"] = ipw_mean(f, labels.idx, y, labels.pi, strata, confidence,
                                use_judge=False)
        out["corrected"] = ipw_mean(f, labels.idx, y, labels.pi, strata, confidence)
    for est in out.values():
        est.details = {**details, **est.details}
    if "rogan_gladen" in methods and binary:
        if design not in ("random", "census"):
            out["rogan_gladen"] = Estimate.refused(
                "rogan_gladen", f"a {design} sample: Rogan–Gladen needs a simple random one "
                "(its sensitivity and specificity are unweighted shares)", **details)
        else:
            out["rogan_gladen"] = rogan_gladen(f, y, f[labels.idx], confidence, min_per_class)
            out["rogan_gladen"].details = {**details, **out["rogan_gladen"].details}
    if "ppi++" not in methods:
        del out["corrected"]
    return out
