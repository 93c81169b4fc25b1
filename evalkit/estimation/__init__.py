"""Estimates of a mean or a rate from a judge's verdicts on every record and human labels on
a sample of them: judge-only, human-only and judge-corrected (PPI++, inverse-probability
weighted, Rogan–Gladen), each with its interval. The ``corrected`` metric, ``evalkit label
sample``, ``evalkit compare`` and the report share these functions; the formulas and their
references are in docs/labels.md."""

from __future__ import annotations

from evalkit.estimation._estimate import Estimate, z_value
from evalkit.estimation.classic import human_mean, judge_mean
from evalkit.estimation.corrected import METHODS, LabelSet, slice_estimates
from evalkit.estimation.ipw import ipw_mean
from evalkit.estimation.planning import expected_half_widths
from evalkit.estimation.ppi import (
    census_mean,
    ppi_lambda,
    ppi_mean,
    ppi_paired_difference,
)
from evalkit.estimation.rogan_gladen import rogan_gladen

__all__ = ["METHODS", "Estimate", "LabelSet", "census_mean", "expected_half_widths",
           "human_mean", "ipw_mean", "judge_mean", "ppi_lambda", "ppi_mean",
           "ppi_paired_difference", "rogan_gladen", "slice_estimates", "z_value"]
