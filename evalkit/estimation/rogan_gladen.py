"""A prevalence corrected for a binary judge's misclassification (Rogan and Gladen, Am. J.
Epidemiol. 1978), with the delta-method interval of Lee, Zeng, Jeong, Sohn and Lee, "How to
Correctly Report LLM-as-a-Judge Evaluations" (arXiv:2511.21140, 2025), which counts the
uncertainty of the judge's sensitivity and specificity estimated from human labels, taken
for the run's own records (below).

With ``p`` the share of the ``n`` records the judge flags, and on the labelled records
sensitivity ``q1`` (flagged among the ``m1`` the humans flag) and specificity ``q0``
(not flagged among the ``m0`` the humans pass)::

    theta = (p + q0 - 1) / (q0 + q1 - 1)

The interval is the delta method's around the estimate made from adjusted proportions
(``q0``, ``q1`` with one added to each side, Lang and Reiczigel, Prev. Vet. Med. 2014),
which keeps it from collapsing when a count is 0 or at its maximum. Its estimand is the
share of the run's own records the humans would flag (the all-labels truth): the judge's
rate ``p`` over them is then known, not estimated, and the ``m = m0 + m1`` labels are drawn
from those ``n`` records without replacement, so::

    var = (1 - m/n) [(1-theta)^2 q0(1-q0)/m0 + theta^2 q1(1-q1)/m1] / (q0 + q1 - 1)^2

``finite=False`` gives Lee et al.'s interval for the rate of the process the records come
from instead: ``p`` adjusted by z^2/2 on each side and ``p(1-p)/n`` added inside the
brackets, without the ``1 - m/n``. Either is conservative when few labels fall in a class
(the adjustment pulls ``q0 + q1`` toward 1, and the variance divides by its square): on 30
labels of BEGIN it covers 0.95-0.99 at 90%; on 225 of FRANK 0.91-0.93.

The interval is clipped to [0, 1]. It is refused when a class has fewer than
``min_per_class`` labels or the judge is not shown better than chance: Youden's
``J = q0 + q1 - 1`` (the correction divides by it) not significantly above 0, i.e. the
lower bound of J's own interval at the same confidence (``J ± z·se``, se from the adjusted
``q0``, ``q1`` as above) at or below 0. Then
the set of prevalences the labels allow is unbounded (Fieller's: the denominator may be 0),
and no delta-method interval around the ratio can cover."""

from __future__ import annotations

import numpy as np

from evalkit.estimation._estimate import Estimate, z_value

__all__ = ["rogan_gladen"]


def rogan_gladen(judge_flags: np.ndarray, y: np.ndarray, f: np.ndarray,
                 confidence: float = 0.95, min_per_class: int = 5,
                 finite: bool = True) -> Estimate:
    """The corrected share of records humans would flag. ``judge_flags``: the judge's 0/1
    verdict on every record; ``y`` and ``f``: the human's and the judge's 0/1 verdicts on
    the labelled ones (a simple random sample of the records). The interval is for the
    share of these records; ``finite=False``: of the process they come from."""
    flags, y, f = (np.asarray(a, dtype=float) for a in (judge_flags, y, f))
    n = len(flags)
    m1, m0 = int((y == 1).sum()), int((y == 0).sum())
    details = {"n": n, "m1": m1, "m0": m0}
    if min(m0, m1) < min_per_class:
        return Estimate.refused("rogan_gladen", f"too few labels in a class ({m1} flagged, "
                                f"{m0} not, by the humans; at least {min_per_class} each)",
                                **details)
    p = float(flags.mean())
    q1 = float(((f == 1) & (y == 1)).sum() / m1)
    q0 = float(((f == 0) & (y == 0)).sum() / m0)
    details.update({"judge_rate": p, "sensitivity": q1, "specificity": q0})
    if q0 + q1 <= 1:
        return Estimate.refused("rogan_gladen", f"the judge is no better than chance on the "
                                f"labelled records (sensitivity {q1:.3g} + specificity "
                                f"{q0:.3g} <= 1)", **details)
    z = z_value(confidence)
    # the judge's rate over these records is known; over the process it is a sample's
    pt = p if finite else (n * p + z * z / 2) / (n + z * z)
    q1t = (m1 * q1 + 1) / (m1 + 2)
    q0t = (m0 * q0 + 1) / (m0 + 2)
    youden = q0t + q1t - 1
    se_j = float(np.sqrt(q1t * (1 - q1t) / (m1 + 2) + q0t * (1 - q0t) / (m0 + 2)))
    if youden - z * se_j <= 0:
        # J's interval reaches 0: the labels cannot tell this judge from a coin, and the
        # correction, dividing by J, could be anything (a judge at chance on the raw counts
        # lands here too)
        return Estimate.refused("rogan_gladen", f"the judge is no better than chance on the "
                                f"labelled records: Youden's J = sensitivity {q1:.3g} + "
                                f"specificity {q0:.3g} - 1 = {q0 + q1 - 1:.3g} is not "
                                f"significantly above 0 ({confidence:.0%} lower bound "
                                f"{youden - z * se_j:.3g}, from {m1} and {m0} labels)",
                                **details)
    value = float(np.clip((p + q0 - 1) / (q0 + q1 - 1), 0.0, 1.0))
    centre = float(np.clip((pt + q0t - 1) / youden, 0.0, 1.0))
    labels = ((1 - centre) ** 2 * q0t * (1 - q0t) / m0 + centre ** 2 * q1t * (1 - q1t) / m1)
    if finite:  # the labels are drawn without replacement from these n records
        var = max(1 - (m0 + m1) / n, 0.0) * labels / youden ** 2
    else:
        var = (pt * (1 - pt) / n + labels) / youden ** 2
    half = z * float(np.sqrt(var))
    details["youden"] = q0 + q1 - 1
    return Estimate("rogan_gladen", value, max(0.0, centre - half), min(1.0, centre + half),
                    details)
