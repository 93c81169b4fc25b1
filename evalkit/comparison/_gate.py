"""Regression gates: "fail if this metric got worse by more than this much, with evidence".

A gate names a metric row (``metric``, ``slice``), the direction that is worse (``up``:
the metric rising is a regression, as an echo rate; ``down``: falling, as an accuracy;
default: the metric's own ``higher_is_better``) and a ``tolerance``: how much worse B may be
than A before it counts. The gate fails when the data show, at the comparison's confidence,
that B is worse than A by more than the tolerance: the one-sided test of "worse by at most
the tolerance" rejects at (1 − confidence) / 2 after the correction across gates, which
is the two-sided interval lying wholly past the tolerance. A change within the noise never
fails a gate; a gate that cannot be checked (the metric is missing or undefined) fails,
saying why, so a broken gate is never a silent pass.

Written on the command line as ``METRIC[@SLICE]:[+|-]TOLERANCE`` (``echo_rate:+0.02``:
fail if echo_rate rises by more than 0.02; ``accuracy@model=a:-0.01``; ``echo_rate:0``: the
bad direction from the metric), or in a run's config as a ``gates:`` list of
``{metric, slice, tolerance, worse}``."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from evalkit.checks import check_one_of

DIRECTIONS = ("up", "down")
_SPEC = re.compile(r"^(?P<metric>[^@:]+?)(?:@(?P<slice>[^:]+))?:(?P<sign>[+-]?)"
                   r"(?P<tol>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)$")


@dataclass(frozen=True)
class GateConfig:
    metric: str  # the metric row, as in the metrics table (echo_rate, latency.p95)
    tolerance: float = 0.0  # how much worse B may be than A (in the metric's units)
    slice: str = "all"  # which slice
    worse: str | None = None  # up or down: the direction that is a regression; null: the metric's

    def validate(self) -> None:
        if self.tolerance < 0:
            raise ValueError(f"tolerance: must be 0 or more, got {self.tolerance} (the "
                             "direction goes in 'worse')")
        if self.worse is not None:
            check_one_of(self.worse, DIRECTIONS, "worse")

    def __str__(self) -> str:
        sign = {"up": "+", "down": "-", None: ""}[self.worse]
        at = "" if self.slice == "all" else f"@{self.slice}"
        return f"{self.metric}{at}:{sign}{self.tolerance:g}"


def parse_gate(text: str) -> GateConfig:
    """A gate from its command-line form ``METRIC[@SLICE]:[+|-]TOLERANCE``; ValueError
    naming the form on anything else."""
    m = _SPEC.match(text.strip())
    if not m:
        raise ValueError(f"--gate {text!r}: expected METRIC[@SLICE]:[+|-]TOLERANCE, e.g. "
                         "'echo_rate:+0.02' (fail if echo_rate rises by more than 0.02) or "
                         "'accuracy:-0.01' (fail if it falls by more than 0.01)")
    worse = {"+": "up", "-": "down", "": None}[m["sign"]]
    gate = GateConfig(m["metric"].strip(), float(m["tol"]), (m["slice"] or "all").strip(),
                      worse)
    gate.validate()
    return gate


def gate_test(tolerance: float, resampled: np.ndarray | None = None,
              flips: tuple[int, int] | None = None, records: int | None = None,
              ) -> tuple[str, float, float]:
    """``(test, p, Monte-Carlo error)``: the one-sided p-value of "B is worse than A by at
    most ``tolerance``". ``flips``: the (worse, better) counts of a rate paired per record,
    used with McNemar's exact test when the tolerance is 0 (no Monte-Carlo error);
    otherwise ``resampled``: the paired bootstrap's changes, signed so that positive is
    worse, over ``records`` records (its p-value never below
    :func:`~evalkit.comparison._significance.records_floor`)."""
    from evalkit.comparison._significance import bootstrap_test, mcnemar_exact, records_floor

    if tolerance == 0 and flips is not None:
        return "mcnemar_exact", mcnemar_exact(flips[0], flips[1], "greater"), 0.0
    if resampled is None:
        raise ValueError("gate_test: give the resampled changes or the flips")
    t = bootstrap_test(resampled, tolerance, "greater")
    floor = records_floor(records, "greater") if records is not None else 0.0
    if floor > t.p_value:  # the floor is no draw: no Monte-Carlo error
        return "paired_bootstrap", floor, 0.0
    return "paired_bootstrap", t.p_value, t.mc_error
