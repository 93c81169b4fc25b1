"""Multiplicity corrections: many rows compared at once, one error rate for all of them.

With 40 rows tested at 5% each, about two come out "significant" by chance. A correction
adjusts each row's p-value so that the family keeps the stated error rate:

- ``holm`` (the default): Holm's step-down Bonferroni, which keeps the chance of any false
  alarm among the rows (the family-wise error rate) at or below alpha, whatever the rows'
  dependence. Right for a gate: one false "regression" fails the build.
- ``bh``: Benjamini and Hochberg's step-up procedure, which keeps the expected share of
  false alarms among the rows called significant (the false discovery rate) at or below
  alpha, for independent or positively dependent rows. Less strict with many rows.
- ``none``: each row on its own.

The adjusted values equal ``statsmodels.stats.multitest.multipletests`` (methods ``holm`` and
``fdr_bh``), its test oracle."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CORRECTIONS = ("holm", "bh", "none")
NAMES = {"holm": "Holm (family-wise error rate)",
         "bh": "Benjamini–Hochberg (false discovery rate)",
         "none": "no correction"}


def adjust(p_values: Sequence[float | None], method: str = "holm") -> list[float | None]:
    """The adjusted p-values of ``p_values`` under ``method`` (see :data:`CORRECTIONS`); a
    ``None`` (a row with no test) stays ``None`` and is not counted in the family."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction: {method!r} is not one of {', '.join(CORRECTIONS)}")
    at = [i for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    if not at:
        return out
    p = np.array([p_values[i] for i in at], dtype=float)
    m = len(p)
    if method == "none":
        adj = p
    elif method == "holm":
        order = np.argsort(p, kind="stable")
        steps = (m - np.arange(m)) * p[order]
        adj = np.empty(m)
        adj[order] = np.minimum(np.maximum.accumulate(steps), 1.0)
    else:
        order = np.argsort(p, kind="stable")[::-1]  # largest first
        steps = p[order] * m / (m - np.arange(m))
        adj = np.empty(m)
        adj[order] = np.minimum(np.minimum.accumulate(steps), 1.0)
    for k, i in enumerate(at):
        out[i] = float(adj[k])
    return out


def lone_alpha(alpha: float, family: int, method: str) -> float:
    """The level a single row must reach to be significant when it is the only change among
    ``family`` rows: ``alpha / family`` for Holm and Benjamini–Hochberg (their first step),
    ``alpha`` without a correction. The smallest detectable change is computed at it."""
    if method == "none" or family <= 1:
        return alpha
    return alpha / family
