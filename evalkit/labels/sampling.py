"""``evalkit label sample``: which records of a run to label, drawn so that the labels
estimate: each record's inclusion probability is known and stored with the sample.

- ``random``: a simple random sample of ``budget`` records (probability n/N each);
- ``stratified``: strata by the judge's verdict (or a record column), a simple random sample
  in each, sized by Neyman allocation (``n_h`` proportional to ``N_h S_h``). ``S_h``, the
  spread of the human values in the stratum, is unknown before labelling; the judge's scores
  stand in for it (``sqrt(m(1-m))``, ``m`` their mean shrunk toward 1/2 by one record each
  way, for scores in [0, 1]; their standard deviation otherwise), never below half the
  largest stratum's;
- ``active``: each record drawn on its own (Poisson sampling) with a probability that grows
  where the judge is least certain: a share ``tau`` of the budget uniform, the rest in
  proportion to ``sqrt(s(1-s))`` of a score ``s`` in [0, 1]; ``tau`` at least 0.5 (no
  record below half the uniform probability n/N) and raised until the design's effective
  sample size is at least 0.9 n, so a judge unsure of few records cannot make the weights
  so uneven that the interval undercovers, nor a score that is no probability cost more
  than 5% of the width.

The population is the run's included records that the judge scored."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from evalkit.errors import LabelError
from evalkit.labels.store import SAMPLES, write_sample

__all__ = ["SAMPLE_DESIGNS", "Drawn", "draw_indices", "draw_sample", "population"]

SAMPLE_DESIGNS = ("random", "stratified", "active")


@dataclass
class Drawn:
    """A drawn sample and what it was drawn from."""

    table: pa.Table  # SAMPLES rows
    population: int
    judge_rate: float  # the judge's mean score over the population
    path: Path | None = None
    # active only: the share of the budget spread evenly, and Kish's effective sample size
    # N^2 / sum(1/pi) of the design (the budget for a simple random sample)
    tau: float | None = None
    effective_n: float | None = None


def population(run_dir: Path, judge: str, by: str | None = None,
               threshold: float | None = None) -> dict[str, Any]:
    """The records a sample is drawn from: included records with a usable verdict of
    ``judge``: their ids, the judge's score (a value, or 1 for ``passed = false``), the
    verdict past ``threshold`` and the ``by`` column."""
    from evalkit.metrics._judged import judged_table
    from evalkit.results.writer import run_connection

    con = run_connection(run_dir)
    try:
        cols = ["record_id"] + ([by] if by and by != "record_id" else [])
        table = judged_table(con, judge, cols)
    finally:
        con.close()
    status = table.column("status").to_pylist()
    if all(s is None for s in status):
        raise LabelError(f"label sample: judge {judge!r} left no judgment in run "
                         f"{run_dir.name}; name one of its judges with --judge")
    value = np.array([np.nan if v is None else v for v in table.column("value").to_pylist()])
    passed = table.column("passed").to_pylist()
    score = np.where(np.isnan(value), [np.nan if p is None else float(not p) for p in passed],
                     value)
    keep = np.array([s == "ok" for s in status]) & \
        np.array([e is None for e in table.column("excluded_by").to_pylist()]) & \
        ~np.isnan(score)
    idx = np.flatnonzero(keep)
    ids = np.array(table.column("record_id").to_pylist(), dtype=object)[idx]
    score = score[idx]
    cut = 0.5 if threshold is None else threshold
    out = {"record_id": ids, "score": score, "verdict": (score > cut).astype(float)}
    if by:
        out["by"] = np.array([str(v) for v in table.column(by).to_pylist()], dtype=object)[idx]
    return out


def draw_sample(run_dir: Path, runs_dir: Path, judge: str, budget: int, design: str,
                seed: int, by: str | None = None, threshold: float | None = None,
                write: bool = True) -> Drawn:
    """Draw and (with ``write``) store a sample of ``budget`` records of ``run_dir``."""
    if design not in SAMPLE_DESIGNS:
        raise LabelError(f"label sample --design: {design!r} is not one of "
                         f"{', '.join(SAMPLE_DESIGNS)}")
    if budget < 2:
        raise LabelError("label sample --budget: at least 2 records")
    pop = population(run_dir, judge, by if design == "stratified" else None, threshold)
    big_n = len(pop["record_id"])
    if big_n < budget:
        raise LabelError(f"label sample --budget {budget}: the judge scored only {big_n} "
                         "included records in this run; label them all (a census) or draw "
                         "fewer")
    rng = np.random.default_rng(seed)
    keys = None
    if design == "stratified":
        keys = pop["by"] if by else np.array(["flagged" if v else "not flagged"
                                              for v in pop["verdict"]], dtype=object)
    idx, prob, strata = draw_indices(design, pop["score"], budget, rng, keys)
    manifest_run = run_dir.name
    sample_id = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{manifest_run}-{judge}-{design}-s{seed}")
    n = len(idx)
    table = pa.table({
        "sample_id": [sample_id] * n, "run_id": [manifest_run] * n, "judge": [judge] * n,
        "record_id": [str(r) for r in pop["record_id"][idx]], "design": [design] * n,
        "inclusion_prob": prob.astype(float),
        "stratum": pa.nulls(n, pa.string()) if strata is None else [str(s) for s in strata],
        "population": [big_n] * n, "seed": [seed] * n}, schema=SAMPLES)
    drawn = Drawn(table, big_n, float(np.mean(pop["verdict"] if threshold is not None
                                              or _binary(pop["score"]) else pop["score"])))
    if design == "active":
        pi_all, drawn.tau = _active_probabilities(pop["score"], budget)
        drawn.effective_n = big_n ** 2 / float(np.sum(1 / pi_all))
    if write:
        drawn.path = write_sample(runs_dir, table)
    return drawn


def draw_indices(design: str, score: np.ndarray, budget: int, rng: np.random.Generator,
                 keys: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The draw itself, over records ``0..len(score)-1``: the chosen indices (sorted), the
    inclusion probability each was drawn with, and its stratum (None but for
    ``stratified``, whose strata are ``keys``). The coverage bench calls it too, so the
    probabilities it checks are the ones this draw realises."""
    big_n = len(score)
    if design == "random":
        idx = np.sort(rng.choice(big_n, budget, replace=False))
        return idx, np.full(len(idx), budget / big_n), None
    if design == "stratified":
        if keys is None:
            raise ValueError("a stratified draw needs each record's stratum (keys)")
        return _stratified(keys, score, budget, rng)
    pi, _ = _active_probabilities(score, budget)
    idx = np.flatnonzero(rng.random(big_n) < pi)
    return idx, pi[idx], None


def _binary(score: np.ndarray) -> bool:
    return bool(np.all((score == 0) | (score == 1)))


def _spread(score: np.ndarray) -> float:
    if np.all((score >= 0) & (score <= 1)):
        m = (score.sum() + 1) / (len(score) + 2)
        return float(np.sqrt(m * (1 - m)))
    return float(np.std(score)) or 1e-6


def _stratified(keys: np.ndarray, score: np.ndarray, budget: int, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    names = list(dict.fromkeys(keys.tolist()))
    members = [np.flatnonzero(keys == k) for k in names]
    sizes = np.array([len(m) for m in members], dtype=float)
    if budget < 2 * len(names):
        raise LabelError(f"label sample --budget {budget}: {len(names)} strata need at least "
                         f"2 labels each ({2 * len(names)})")
    spread = np.array([_spread(score[m]) for m in members])
    # The judge's certainty is not the humans' spread: a stratum it scores all 0 may hold
    # many errors. Each stratum counts at least half the largest spread, so no stratum is
    # starved of labels (FRANK, FactCC: 12 of 225 labels for the 810 summaries it passed,
    # an interval 1.9x a simple random sample's)
    weight = sizes * np.maximum(spread, 0.5 * float(spread.max()))
    alloc = _allocate(weight, sizes.astype(int), budget)
    idx, prob, strata = [], [], []
    for name, m, n_h in zip(names, members, alloc, strict=False):
        chosen = rng.choice(m, n_h, replace=False)
        idx.extend(chosen)
        prob.extend([n_h / len(m)] * n_h)
        strata.extend([name] * n_h)
    order = np.argsort(idx)
    return (np.array(idx)[order], np.array(prob)[order],
            np.array(strata, dtype=object)[order])


def _allocate(weight: np.ndarray, sizes: np.ndarray, budget: int) -> np.ndarray:
    """Integer sizes proportional to ``weight`` (largest remainders), each at least 2 (or
    the whole stratum) and at most its stratum's size, summing to ``budget``."""
    alloc = np.minimum(sizes, 2)
    left = budget - int(alloc.sum())
    while left > 0:
        room = sizes - alloc
        share = np.where(room > 0, weight, 0.0)
        if share.sum() <= 0:
            share = (room > 0).astype(float)
        ideal = share / share.sum() * left
        add = np.minimum(np.floor(ideal).astype(int), room)
        if add.sum() == 0:
            k = int(np.argmax(np.where(room > 0, ideal - np.floor(ideal) + 1e-9, -1)))
            add[k] = 1
        alloc += add
        left -= int(add.sum())
    return alloc


# The active design's floor: at least this share of the budget is spread evenly, so no
# record's probability is below MIN_UNIFORM * n/N; and more while Kish's effective sample
# size N^2 / sum(1/pi) is below MIN_EFFECTIVE_SHARE * n (see _active_probabilities)
MIN_UNIFORM = 0.5
MIN_EFFECTIVE_SHARE = 0.9


def _active_probabilities(score: np.ndarray, budget: int) -> tuple[np.ndarray, float]:
    """``pi = n * (tau / N + (1 - tau) * u)``, ``u`` proportional to ``sqrt(s(1-s))``: the
    uncertainty rule mixed with the uniform one (Zrnic and Candès, "Active statistical
    inference", ICML 2024, who mix the two so the weights stay bounded). ``tau`` is the
    smallest of 0.5, 0.55, ..., 1 whose design keeps Kish's effective sample size
    ``N^2 / sum(1/pi)`` (``n`` for a simple random sample) at least 0.9 n: a judge unsure
    of a few records only (HaluEval's `phrases`, which flags 99.7%) put 223 of 300 records
    at the floor ``n/(2N)`` with a fixed ``tau = 0.5``, an effective size of 0.62 n, weights
    so uneven that the interval's variance rested on ~3.5 degrees of freedom and covered
    0.82 at 90%. And the rule gains only where ``sqrt(s(1-s))`` tracks the humans' spread
    about the judge: BEGIN's token-overlap score is surest (0) where the humans are least
    predictable, and at 0.8 n its intervals were 1.01-1.03x the labels alone on a random
    sample; at 0.9 n (at most 1/sqrt(0.9), 5%, wider than uniform), 0.94-0.97x, while a
    calibrated score keeps all its gain or most of it (tau 0.5-0.6 for scores drawn from
    Beta(0.3-1, 0.3-1), outcomes from them). Capped at 1, the excess handed to the
    others, so the expected sample size is ``budget``. Returns the probabilities and
    ``tau``."""
    big_n = len(score)
    s = np.clip(score, 0, 1) if np.all((score >= 0) & (score <= 1)) else \
        (score - score.min()) / (np.ptp(score) or 1)
    u = np.sqrt(s * (1 - s))
    u = u / u.sum() if u.sum() > 0 else np.full(big_n, 1 / big_n)
    for tau in np.linspace(MIN_UNIFORM, 1.0, 11):
        pi = _capped(budget * (tau / big_n + (1 - tau) * u))
        if big_n ** 2 / float(np.sum(1 / pi)) >= MIN_EFFECTIVE_SHARE * budget:
            break
    return pi, float(tau)


def _capped(pi: np.ndarray) -> np.ndarray:
    """``pi`` capped at 1, what the cap cuts off handed to the others in proportion."""
    for _ in range(50):
        over = pi > 1
        if not over.any():
            break
        extra = float((pi[over] - 1).sum())
        pi[over] = 1.0
        free = pi < 1
        pi[free] += extra * pi[free] / pi[free].sum()
    return np.minimum(pi, 1.0)
