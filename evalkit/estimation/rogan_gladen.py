"""A prevalence corrected for a binary judge's misclassification (Rogan and Gladen, Am. J.
Epidemiol. 1978): the share of records humans would flag, from the judge's verdict on every
record and human labels on a simple random sample of them.

With ``p`` the share of the ``N`` records the judge flags, sensitivity ``q1`` and
specificity ``q0``::

    theta = (p + q0 - 1) / (q0 + q1 - 1)

Lee, Zeng, Jeong, Sohn and Lee, "How to Correctly Report LLM-as-a-Judge Evaluations"
(arXiv:2511.21140, 2025) estimate ``q0``, ``q1`` on a separate calibration set and give the
delta-method interval; its variance, from ``m`` labels,
``[(1-theta) q0(1-q0) + theta q1(1-q1)] / (m J^2)`` with ``J = q0 + q1 - 1``, is the labels
alone's ``theta(1-theta)/m`` only for a judge near perfect: 1.3-2.5 times as wide (in
standard error) for judges with J = 0.37-0.62 (BEGIN, FRANK). Here the labels are a random
sample of the very records the judge scored, and the judge's verdict on all of them is
information about its error rates too. The maximum-likelihood estimate in that design
(double sampling: Tenenbein, JASA 1970) is Rogan and Gladen's formula at the
maximum-likelihood ``q0``, ``q1``, which is the predictive-value form::

    theta = p * P(human flags | judge flags) + (1 - p) * P(human flags | judge passes)

with the two rates from the labelled records of each verdict. It is the mean post-stratified
by the verdict, whose variance (given the labels per verdict, ``n_v`` of ``N_v``; Holt and
Smith, JRSS A 1979)::

    var = sum_v (N_v/N)^2 (1 - n_v/N_v) s_v^2 / n_v

is ``E[var(y | verdict)] / m = (1 - rho^2) theta(1-theta) / m`` to first order, ``rho`` the
judge-human correlation: never above the labels alone's, and below it for any judge
better than chance (for 0/1 verdicts ``rho^2 = J^2 theta(1-theta) / (p(1-p))``). The
interval is Wilson's at the effective sample size ``theta(1-theta)/var`` with Student's t
at Satterthwaite's degrees of freedom, as for the stratified IPW estimate. Its estimand is
the share of these records (the all-labels truth); ``finite=False`` adds ``S_y^2 / N`` for
the rate of the process they come from. ``details`` holds the maximum-likelihood
sensitivity and specificity and, beside them, the labelled records' own
(``labelled_sensitivity``, ``labelled_specificity``).

Refused (the reason in ``details.undefined``) when a human class has fewer than
``min_per_class`` labels, or a verdict fewer than 2 (its rate's spread is unknown), and when
the judge is not shown better than chance: Youden's ``J`` not significantly above 0, i.e.
the lower bound of ``J ± z·se`` (``q0``, ``q1`` of the labels adjusted by one on each side,
Lang and Reiczigel, Prev. Vet. Med. 2014) at or below 0. At ``J = 0`` the judge's verdict
says nothing of the humans' (``rho = 0``): the correction can only repeat the labels alone,
and a misclassification model whose error rates are not identified is no correction."""

from __future__ import annotations

import numpy as np

from evalkit.estimation._estimate import Estimate, z_value
from evalkit.estimation.ipw import ipw_mean

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
    details.update({"judge_rate": p, "sensitivity": q1, "specificity": q0,
                    "labelled_sensitivity": q1, "labelled_specificity": q0})
    if q0 + q1 <= 1:
        return Estimate.refused("rogan_gladen", f"the judge is no better than chance on the "
                                f"labelled records (sensitivity {q1:.3g} + specificity "
                                f"{q0:.3g} <= 1)", **details)
    z = z_value(confidence)
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
    # The labels are a random sample of these records: the judge's verdict on all of them
    # is information about its error rates too. The maximum-likelihood estimate of the
    # prevalence in this design (Tenenbein 1970) is the share of each verdict times the
    # humans' rate among the labelled records with that verdict: Rogan and Gladen's formula
    # at the maximum-likelihood sensitivity and specificity.
    rates, pi = [], np.empty(len(y))
    for v in (1.0, 0.0):
        in_v = f == v
        big_v, n_v = int((flags == v).sum()), int(in_v.sum())
        if n_v < 2:  # (both verdicts occur here: a judge of one verdict is at chance)
            return Estimate.refused("rogan_gladen", f"too few labels in a class: {n_v} of the "
                                    f"records the judge {'flags' if v else 'passes'} (at least "
                                    "2, for the humans' rate among them and its spread)",
                                    **details)
        rates.append(float(y[in_v].mean()))
        pi[in_v] = n_v / big_v
    # the labels post-stratified by the verdict (conditional on n_v, Holt and Smith 1979),
    # drawn without replacement from these records: the stratified IPW estimate of the
    # labels alone, strata the verdicts, each labelled record standing for N_v / n_v
    est = ipw_mean(flags, None, y, pi, f, confidence, use_judge=False, finite=finite)
    if not est.details["se"] > 0:
        return Estimate.refused("rogan_gladen", "the labels leave no spread to estimate the "
                                "judge's error from (all alike within each verdict): the "
                                "interval would have no width; label more records", **details)
    value, df = est.value, est.details["df"]
    if 0 < value < 1:  # the maximum-likelihood ones (those of the labels stay beside)
        details["sensitivity"] = p * rates[0] / value
        details["specificity"] = (1 - p) * (1 - rates[1]) / (1 - value)
    details.update({"youden": details["sensitivity"] + details["specificity"] - 1,
                    "df": float(df), "estimator": "maximum likelihood (predictive values)"})
    return Estimate("rogan_gladen", value, est.low, est.high, details)
