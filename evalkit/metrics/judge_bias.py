"""``judge_bias``: how much a judge's verdict depends on things that should not matter, as
magnitudes with intervals. For any scored judge: the slope of its score on the output's
length (per 100 tokens) and each slice's score at the run's mean length (a length-controlled
score); self-preference, when the judge's model family also produced some of the outputs.
For ``pairwise``: how often the verdict survives swapping the two outputs' positions, and
the share of decisive calls won by whichever output came first (0.5: no position bias).
The intervals of the slope, the length-controlled score and self-preference resample records;
the two shares are proportions, Wilson's (the first-position share's at its effective size, a
record's two calls being a cluster)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.metrics._intervals import clustered_proportion_ci
from evalkit.metrics._pair_statistics import records_interval
from evalkit.metrics._signals import (
    SliceConfig,
    index_slices,
    judgment_join,
    metric_row,
    per_record,
)
from evalkit.metrics._stats import slice_sql, wilson_ci
from evalkit.plugin import Metric, Produces

__all__ = ["JudgeBiasConfig", "JudgeBiasMetric", "model_family"]


@dataclass(frozen=True)
class JudgeBiasConfig(SliceConfig):
    judge: str = "???"  # the judge instance probed


def model_family(model: str | None) -> str | None:
    """The family of a model name: its first word, provider prefix and version left out
    (``openai/gpt-4o-mini`` and ``gpt-4.1``: ``gpt``; ``claude-3-5-haiku``: ``claude``)."""
    if not model:
        return None
    found = re.match(r"[a-z]+", model.rsplit("/", 1)[-1].lower())
    return found.group(0) if found else None


class JudgeBiasMetric(Metric):
    """Rows ``NAME.length_slope`` (score change per 100 output tokens), ``NAME.length_
    controlled`` (per slice: the mean score at the run's mean length), ``NAME.self_
    preference`` (mean score on outputs of the judge's own model family minus the others'),
    and for a ``pairwise`` judge ``NAME.swap_consistency`` and ``NAME.first_position``."""

    Config = JudgeBiasConfig
    higher_is_better = None
    thread_safe = True

    def produces(self) -> Produces:
        stats = ("length_slope", "length_controlled", "self_preference", "swap_consistency",
                 "first_position")
        return Produces(tuple(f"{self.name}.{s}" for s in stats),
                        slice_by=tuple(self.config.slice_by))

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        cols = ", ".join(slice_sql(c, "r") for c in dict.fromkeys(
            ["excluded_by", *cfg.slice_by]))

        def query(pick: bool) -> tuple[str, list[Any]]:
            # every record once (one judgment each, picked as every metric picks it), in
            # order of content (ORDER BY ALL, every column read): the bootstraps resample
            # rows by position, and rows in the join's or the ids' order gave a merged,
            # shuffled or renamed run other intervals
            join, params = judgment_join(con, cfg.judge, ["value", "judge_model", "details"],
                                         "j", pick)
            return ("SELECT j.value AS _value, coalesce(r.output_tokens, length(r.output) / "
                    "4.0) AS _length, r.model AS _model, j.status AS _status, j.judge_model "
                    f"AS _judge_model, j.details AS _details, {cols} FROM records r {join} "
                    "ORDER BY ALL NULLS LAST", params)

        table = per_record(con, query)
        col = {c: table.column(c).to_pylist() for c in
               ("_model", "_length", "_value", "_status", "_judge_model", "_details")}
        ok = np.array([s == "ok" and v is not None and exc is None for s, v, exc in zip(
            col["_status"], col["_value"], table.column("excluded_by").to_pylist(),
            strict=True)], dtype=bool)
        value = np.array([np.nan if v is None else v for v in col["_value"]], dtype=float)
        length = np.array([np.nan if x is None else x for x in col["_length"]], dtype=float)
        rows: list[dict[str, Any]] = []
        counts_all = self._counts(table, ok, np.arange(table.num_rows))
        usable = ok & ~np.isnan(length)
        rows += self._length_rows(table, value, length, usable)
        rows.append(self._self_preference(value, ok, col, counts_all))
        details = [json.loads(d) if d else {} for d in col["_details"]]
        if any("orders_agree" in d for d in details):
            rows += self._pairwise(details, ok, counts_all)
        return rows

    def _counts(self, table: Any, ok: np.ndarray, idx: np.ndarray) -> dict[str, int]:
        excluded = np.asarray(table.column("excluded_by").is_valid().to_numpy(
            zero_copy_only=False), dtype=bool)
        return {"n_attempted": len(idx), "n_excluded": int(excluded[idx].sum()),
                "n_judged": int(ok[idx].sum()),
                "n_unscored": int((~ok[idx] & ~excluded[idx]).sum())}

    def _interval(self, fn: Callable[[np.ndarray], float], n: int, value: float | None,
                  ) -> tuple[tuple[Any, Any], dict[str, str]]:
        """The bootstrap interval over the ``n`` records of a statistic of ``value`` and how
        it was drawn (``ci_method``), or why there is none (``ci_open``); neither when
        ``n_boot`` is 0 or there is no value."""
        cfg = self.config
        return records_interval(fn, n, value, cfg.n_boot, cfg.seed, cfg.confidence)

    def _length_rows(self, table: Any, value: np.ndarray, length: np.ndarray,
                     usable: np.ndarray) -> list[dict[str, Any]]:
        name = self.name
        at = np.flatnonzero(usable)
        x, y = length[at] / 100.0, value[at]

        def slope(i: np.ndarray) -> float:
            xs = x[i]
            spread = ((xs - xs.mean()) ** 2).sum()
            return float(((xs - xs.mean()) * (y[i] - y[i].mean())).sum() / spread) \
                if spread > 0 else float("nan")

        counts = self._counts(table, usable, np.arange(table.num_rows))
        every = np.arange(len(at))
        b = slope(every) if len(at) >= 2 else float("nan")
        why = ("fewer than 2 scored records with a known length" if len(at) < 2 else
               "every scored output has the same length")
        ci, how = self._interval(slope, len(at), b)
        rows = [metric_row(f"{name}.length_slope", "all", b, ci, **counts,
                           details={"what": "change of the score per 100 output tokens "
                                    "(least squares)", **how}, undefined=why)]
        where = np.full(table.num_rows, -1)
        where[at] = every
        for label, idx in index_slices(table, list(self.config.slice_by)):
            mine = where[idx][where[idx] >= 0]

            def controlled(i: np.ndarray, mine: np.ndarray = mine) -> float:
                # the resample i of every scored record gives the slope and the run's mean
                # length; the slice's own records are those of i that fall in it
                inside = i[np.isin(i, mine)]
                if not len(inside):
                    return float("nan")
                return float(y[inside].mean() - slope(i) * (x[inside].mean() - x[i].mean()))

            v = controlled(every) if len(mine) and not np.isnan(b) else None
            ci, how = self._interval(controlled, len(at), v)
            rows.append(metric_row(
                f"{name}.length_controlled", label, v, ci,
                **self._counts(table, usable, idx),
                details={"what": "mean score at the run's mean output length (the slice's "
                         "mean minus the slope times its length difference)", **how},
                undefined="no scored record with a known length in this slice" if not len(
                    mine) else why))
        return rows

    def _self_preference(self, value: np.ndarray, ok: np.ndarray, col: dict[str, list[Any]],
                         counts: dict[str, int]) -> dict[str, Any]:
        name = self.name
        judge_models = {m for m in col["_judge_model"] if m}
        family = model_family(next(iter(judge_models))) if len(judge_models) == 1 else None
        own = np.array([model_family(m) == family and family is not None
                        for m in col["_model"]], dtype=bool)
        at = np.flatnonzero(ok)
        mine, theirs = own[at], ~own[at]
        v = value[at]

        def gap(i: np.ndarray) -> float:
            a, b = v[i][mine[i]], v[i][theirs[i]]
            return float(a.mean() - b.mean()) if len(a) and len(b) else float("nan")

        why = None
        if family is None:
            why = ("the judge's model is unknown or not one model" if len(judge_models) != 1
                   else "no family in the judge's model name")
        elif not mine.any() or not theirs.any():
            why = (f"no output from the judge's family '{family}'" if not mine.any()
                   else f"every output is from the judge's family '{family}'")
        value_ = None if why else gap(np.arange(len(at)))
        label = f"judge_family={family or 'unknown'}"
        ci, how = self._interval(gap, len(at), value_)
        return metric_row(f"{name}.self_preference", label, value_, ci,
                          **counts, details={"what": "mean score on outputs of the judge's "
                                             "own model family minus the mean on the others",
                                             "family": family, "n_own": int(mine.sum()),
                                             **how},
                          undefined=why)

    def _pairwise(self, details: list[dict[str, Any]], ok: np.ndarray,
                  counts: dict[str, int]) -> list[dict[str, Any]]:
        name, cfg = self.name, self.config
        agree = [bool(d.get("orders_agree")) for d, k in zip(details, ok, strict=True) if k]
        n = len(agree)
        # per record: (first-slot wins, decisive calls); call 1 shows the candidate first
        wins, calls = [], []
        for d, k in zip(details, ok, strict=True):
            if not k:
                continue
            first = (d.get("candidate_first") or {}).get("winner")
            second = (d.get("baseline_first") or {}).get("winner")
            w = (first == "candidate") + (second == "baseline")
            c = (first in ("candidate", "baseline")) + (second in ("candidate", "baseline"))
            wins.append(w)
            calls.append(c)
        w_arr, c_arr = np.array(wins, float), np.array(calls, float)

        ones = sum(agree)
        boot = bool(cfg.n_boot)  # n_boot 0: no interval, Wilson's neither
        rows = [metric_row(f"{name}.swap_consistency", "all", ones / n if n else None,
                           wilson_ci(ones, n, cfg.confidence) if n and boot else (None, None),
                           **counts, details={"what": "share of records whose verdict is the "
                                              "same with the outputs' positions swapped",
                                              **({"ci_method": "wilson"} if boot else {})},
                           undefined="no pairwise judgment")]
        # a proportion of calls clustered in records (two each): Wilson's interval at the
        # ratio's effective size, as citation precision; the bootstrap over records gave
        # [1, 1] when the first slot won every call, and nothing at one record
        total = float(c_arr.sum())
        v = float(w_arr.sum()) / total if total else None
        ci = clustered_proportion_ci(w_arr, c_arr, cfg.confidence) \
            if v is not None and boot else (None, None)
        rows.append(metric_row(
            f"{name}.first_position", "all", v, ci, **counts,
            details={"what": "share of decisive calls won by the output shown first (0.5: "
                     "no position bias)", "decisive_calls": int(total),
                     **({"ci_method": "wilson (effective n)"} if boot else {})},
            undefined="no decisive call (every call a tie)"))
        return rows
