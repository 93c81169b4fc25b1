"""``ece``: Expected Calibration Error of a confidence against correctness, with the
Maximum Calibration Error, the Brier score and the reliability-diagram table.

Conventions (they differ between libraries, so they are pinned here and in the tests):
equal-width bins are ``[lo, hi)`` with ``lo = b / n_bins`` (the floating-point edge, compared
exactly: 0.29 is in [0.29, 0.30) with 100 bins, where ``int(0.29 * 100)`` would say 28) and a
confidence of exactly 1.0 in the last bin; ECE = Σ_b (n_b / N)·|accuracy_b − mean
confidence_b| over non-empty bins; MCE is the largest such gap. Equal-mass bins
(``binning: mass``) split the records sorted by confidence into ``n_bins`` groups of (nearly)
equal size, except that tied confidences never straddle two bins: a run of equal values goes
wholly into the bin of its first member, so the bins depend on the values only, never on the
records' order or ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.checks import check_flag_at
from evalkit.metrics._intervals import canonical
from evalkit.metrics._signals import (
    SliceConfig,
    check_spec,
    excluded_mask,
    fetch,
    index_slices,
    metric_row,
    numbers,
    parse_spec,
    reasons,
)
from evalkit.metrics._stats import mean_ci, mean_ci_open
from evalkit.plugin import Metric, Produces

__all__ = [
    "BINNINGS", "bin_index", "calibration", "EceConfig", "ExpectedCalibrationError",
    "reliability_table",
]

BINNINGS = ("width", "mass")


@dataclass(frozen=True)
class EceConfig(SliceConfig):
    prob: str = "confidence"  # the stated confidence in [0, 1]: a record column or judge:NAME
    correct: str | None = None  # a column (human_label, outcome) or judge:NAME[:passed]
    correct_map: dict[str, float] = field(default_factory=dict)  # text -> 1 correct / 0 wrong
    correct_threshold: float | None = None  # numeric correctness: correct when > it (flag_at)
    n_bins: int = 10  # number of bins
    binning: str = "width"  # width: equal-width [lo, hi) bins; mass: equal-count bins
    flag_at: str = ">"  # at the threshold exactly: ">" wrong, ">=" correct (top-level flag_at)

    def validate(self) -> None:
        super().validate()
        check_spec(self.prob, "prob")
        check_spec(self.correct, "correct")
        if self.n_bins < 1:
            raise ValueError("n_bins: must be at least 1")
        if self.binning not in BINNINGS:
            raise ValueError(f"binning: {self.binning!r} is not one of {', '.join(BINNINGS)}")
        check_flag_at(self.flag_at)


def bin_index(p: np.ndarray, n_bins: int, binning: str) -> np.ndarray:
    """The bin of each confidence, row by row (``p`` has shape ``(rows, n)``): equal-width
    ``[lo, hi)`` with 1.0 in the last bin, or equal-mass (each row sorted and split into
    ``n_bins`` near-equal groups, as ``numpy.array_split`` splits, ties kept together)."""
    if binning == "width":
        edges = np.arange(n_bins + 1) / n_bins
        k = np.clip(np.floor(p * n_bins).astype(int), 0, n_bins - 1)
        # p * n_bins rounds: correct the guess against the edges the bins are defined by
        k = k + (p >= edges[k + 1]) - (p < edges[k])
        return np.clip(k, 0, n_bins - 1)
    n = p.shape[1]
    sizes = [len(c) for c in np.array_split(np.arange(n), n_bins)]
    rank_bin = np.repeat(np.arange(n_bins), sizes)
    order = np.argsort(p, axis=1, kind="stable")
    ordered = np.take_along_axis(p, order, axis=1)
    starts = np.ones(p.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    # the rank where each run of tied values starts, carried along the run
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0), axis=1)
    out = np.empty_like(order)
    np.put_along_axis(out, order, rank_bin[first], axis=1)
    return out


def _per_bin(p: np.ndarray, y: np.ndarray, n_bins: int, binning: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = p.shape[0]
    flat = (bin_index(p, n_bins, binning) + np.arange(rows)[:, None] * n_bins).ravel()
    size = rows * n_bins
    count = np.bincount(flat, minlength=size).reshape(rows, n_bins)
    conf = np.bincount(flat, weights=p.ravel(), minlength=size).reshape(rows, n_bins)
    hits = np.bincount(flat, weights=y.ravel(), minlength=size).reshape(rows, n_bins)
    return count, conf, hits


def calibration(p: np.ndarray, y: np.ndarray, n_bins: int = 10, binning: str = "width"
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ECE, MCE and Brier score per row of confidences ``p`` against 0/1 ``y`` (both of
    shape ``(rows, n)``; vectorised so the bootstrap resamples in one call)."""
    count, conf, hits = _per_bin(p, y, n_bins, binning)
    nonempty = count > 0
    safe = np.where(nonempty, count, 1)
    gap = np.where(nonempty, np.abs(hits / safe - conf / safe), 0.0)
    ece = (count * gap).sum(axis=1) / p.shape[1]
    mce = np.where(nonempty, gap, -np.inf).max(axis=1)
    brier = ((p - y) ** 2).mean(axis=1)
    return ece, mce, brier


def reliability_table(p: np.ndarray, y: np.ndarray, n_bins: int, binning: str
                      ) -> list[dict[str, Any]]:
    """One entry per bin: its range, count, mean confidence and accuracy (a reliability
    diagram's points)."""
    count, conf, hits = (a[0] for a in _per_bin(p[None, :], y[None, :], n_bins, binning))
    idx = bin_index(p[None, :], n_bins, binning)[0]
    table = []
    for b in range(n_bins):
        if binning == "width":
            lo, hi = b / n_bins, (b + 1) / n_bins
        else:
            members = p[idx == b]
            lo = float(members.min()) if len(members) else None
            hi = float(members.max()) if len(members) else None
        n = int(count[b])
        table.append({"bin": b, "lo": lo, "hi": hi, "count": n,
                      "mean_confidence": float(conf[b] / n) if n else None,
                      "accuracy": float(hits[b] / n) if n else None})
    return table


_NO_INTERVAL = ("no interval: the binned estimate is biased upward by sampling noise, so "
                "no bootstrap interval around it covers the population's calibration error "
                "(docs/trust.md#intervals)")


class ExpectedCalibrationError(Metric):
    """Rows ``<name>`` (ECE), ``<name>.mce`` and ``<name>.brier`` per slice, over included
    records with both a confidence in [0, 1] and a 0/1 correctness; the bins are in
    ``details.bins`` (a reliability diagram)."""

    Config = EceConfig
    higher_is_better = False
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: EceConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def produces(self) -> Produces:
        """ECE (the instance name), MCE and the Brier score."""
        return Produces((self.name, f"{self.name}.mce", f"{self.name}.brier"),
                        slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        sp, sc = parse_spec(cfg.prob, "prob"), parse_spec(cfg.correct or "", "correct")
        table = fetch(con, {"p": sp, "y": sc}, list(cfg.slice_by))
        p, why_p = numbers(table, "p", sp, {}, None)
        y, why_y = numbers(table, "y", sc, cfg.correct_map, cfg.correct_threshold,
                           cfg.flag_at)
        for i in np.flatnonzero((p < 0) | (p > 1)):
            why_p[i] = f"{sp.describe()} {p[i]:g} is outside [0, 1]"
            p[i] = np.nan
        for i in np.flatnonzero(~np.isnan(y) & ~np.isin(y, [0.0, 1.0])):
            why_y[i] = (f"{sc.describe()} is {y[i]:g}, not 0 or 1; set correct_threshold or "
                        "correct_map")
            y[i] = np.nan
        excluded = excluded_mask(table)
        rows: list[dict[str, Any]] = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            inc = idx[~excluded[idx]]
            use = inc[~np.isnan(p[inc]) & ~np.isnan(y[inc])]
            counts = {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum()),
                      "n_judged": len(use), "n_unscored": len(inc) - len(use)}
            base: dict[str, Any] = {"prob": cfg.prob, "correct": cfg.correct,
                                    "binning": cfg.binning, "n_bins": cfg.n_bins}
            unusable = {k: v for k, v in (("prob", reasons([why_p[i] for i in inc])),
                                          ("correct", reasons([why_y[i] for i in inc]))) if v}
            if unusable:
                base["unscored_reasons"] = unusable
            if not len(use):
                for stat in ("", ".mce", ".brier"):
                    rows.append(metric_row(self.name + stat, label, None, (None, None),
                                           **counts, details=base))
                continue
            # in canonical order: the bins' sums, and so the bits of every value, are then a
            # function of the pairs, not of the records' order or ids
            pv, yv = canonical([p[use], y[use]])
            values = [float(v[0]) for v in calibration(pv[None, :], yv[None, :], cfg.n_bins,
                                                       cfg.binning)]
            # only the Brier score gets an interval: the binned ECE and MCE are biased upward
            # by sampling noise (at 20 records by twice the population's ECE), so a
            # bootstrap interval around them misses the truth (coverage 1% at 20 records,
            # 59% at 300: bench/bench_coverage.py)
            # the Brier score is a mean of (p - y)^2: the studentized bootstrap of a mean,
            # clipped to [0, 1] (at 4 records its upper bound was 4.25)
            found = mean_ci((pv - yv) ** 2, cfg.n_boot, cfg.seed, cfg.confidence,
                            within=(0.0, 1.0))
            brier_method = found[2]
            cis = [(None, None), (None, None), found.interval]
            bins = reliability_table(pv, yv, cfg.n_bins, cfg.binning)
            for k, stat in enumerate(("", ".mce", ".brier")):
                details = {**base, "bins": bins} if stat == "" else base
                if k < 2 and cfg.n_boot > 0:
                    details = {**details, "ci_open": _NO_INTERVAL}
                elif brier_method:
                    details = {**details, "ci_method": brier_method}
                elif values[k] is not None:
                    details = {**details, **mean_ci_open(len(pv), cfg.n_boot,
                                                         "squared error")}
                rows.append(metric_row(self.name + stat, label, values[k], cis[k], **counts,
                                       details=details))
        return rows
