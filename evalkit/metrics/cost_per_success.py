"""``cost_per_success``: what one successful outcome cost: generation cost (every attempt,
failed ones included) plus, optionally, what the judges cost, divided by the number of
successful outcomes. With no success the value is undefined (null, with the cost spent and
the reason in ``details``), neither 0 nor infinite."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalkit.metrics._outcomes import OutcomeConfig, outcomes
from evalkit.metrics._pair_statistics import NO_WIDTH, bootstrap
from evalkit.metrics._signals import excluded_mask, index_slices, metric_row, reasons
from evalkit.plugin import Metric

__all__ = ["CostPerSuccessConfig", "CostPerSuccessMetric"]


@dataclass(frozen=True)
class CostPerSuccessConfig(OutcomeConfig):
    include_excluded_cost: bool = True  # failed calls a filter set aside still cost money
    judge_cost: bool = False  # add the cost of the judgments on the slice's records
    judges: list[str] = field(default_factory=list)  # only these judges' cost (empty: all)


def _ratio_rows(cost: np.ndarray, success: np.ndarray) -> np.ndarray:
    """Per resample row: total cost / successes (inf when no success but a cost, NaN when
    neither)."""
    total, wins = cost.sum(axis=1), success.sum(axis=1)
    out = np.full(len(total), np.nan)
    np.divide(total, wins, out=out, where=wins > 0)
    out[(wins == 0) & (total > 0)] = np.inf
    return out


class CostPerSuccessMetric(Metric):
    """Row ``<name>`` per slice, in the cost column's currency (USD). The success count comes
    from the included records' outcomes (as ``task_completion``); the cost from every record
    (``include_excluded_cost``). Records without a cost are counted in ``details`` and make
    the value a lower bound; when no record has one, the value is null (unknown, not 0).
    ``ci_high`` is null (open, said in ``details.ci_open``) when
    more than the interval's tail of resamples hold no success."""

    Config = CostPerSuccessConfig
    higher_is_better = False
    thread_safe = True  # compute() may run beside other metrics, on its own cursor

    def __init__(self, name: str, config: CostPerSuccessConfig, ctx: object) -> None:
        self.name = name
        self.config = config

    def _judge_costs(self, con: Any) -> dict[str, float]:
        sql = ("SELECT record_id, sum(cost_usd) FROM judgments WHERE cost_usd IS NOT NULL "
               "AND origin <> 'imported'")
        params: list[Any] = []
        if self.config.judges:
            sql += " AND list_contains(?, judge)"
            params.append(list(self.config.judges))
        return dict(con.execute(sql + " GROUP BY record_id", params).fetchall())

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        table, success, why, spec = outcomes(con, cfg, ["cost_usd"])
        excluded = excluded_mask(table)
        gen = np.asarray(table.column("cost_usd").to_numpy(zero_copy_only=False), dtype=float)
        judge = np.zeros(len(gen))
        if cfg.judge_cost:
            per_record = self._judge_costs(con)
            judge = np.array([per_record.get(r, 0.0) for r in
                              table.column("record_id").to_pylist()], dtype=float)
        priced = ~np.isnan(gen)
        counted = np.ones(len(gen), dtype=bool) if cfg.include_excluded_cost else ~excluded
        cost = np.where(counted & priced, gen, 0.0) + np.where(counted, judge, 0.0)
        wins = np.where(~excluded & (success == 1), 1.0, 0.0)
        rows = []
        for label, idx in index_slices(table, list(cfg.slice_by)):
            inc = idx[~excluded[idx]]
            unscored = int(np.isnan(success[inc]).sum())
            n_success = int(wins[idx].sum())
            # fsum: the correctly rounded sum, whatever order the records come in (a sum in
            # record_id order changed its last bits under other ids)
            total = math.fsum(cost[idx])
            missing = int((counted[idx] & ~priced[idx]).sum())
            details: dict[str, Any] = {
                "total_cost": total, "generation_cost": math.fsum(np.where(
                    counted & priced, gen, 0.0)[idx]),
                "judge_cost": math.fsum(np.where(counted, judge, 0.0)[idx]),
                "n_success": n_success, "outcome": spec.describe(),
                "include_excluded_cost": cfg.include_excluded_cost}
            if missing:
                details["n_cost_missing"] = missing
                details["note"] = (f"{missing} record(s) have no cost: the value is a lower "
                                   "bound")
            unusable = reasons([why[i] for i in inc])
            if unusable:
                details["unscored_reasons"] = unusable
            value: float | None
            undefined = None
            n_counted = int(counted[idx].sum())
            if n_counted and missing == n_counted:
                # an unknown price is not a price of 0 (0 [0, 0] was printed)
                value = None
                undefined = (f"no record in this slice has a cost ({missing} without one): "
                             "the cost is unknown, not 0")
            elif n_success:
                value = total / n_success
            else:
                value = None
                undefined = (f"no successful outcome in this slice: {total:.6g} spent for "
                             "none, a cost per success cannot be divided out" if total > 0
                             else "no successful outcome and no cost in this slice (0/0)")
            ci: tuple[Any, Any] = (None, None)
            if value is not None and len(idx) < 2 and cfg.n_boot > 0:
                details["ci_open"] = "one record: nothing to resample records from"
            elif value is not None and cfg.n_boot > 0:
                ci = bootstrap([cost[idx], wins[idx]], {"r": _ratio_rows}, cfg.n_boot,
                               cfg.seed, cfg.confidence, method="inverted_cdf")["r"]
                if ci[0] is not None and ci[0] == ci[1]:  # (equal costs, every one a success)
                    ci = (None, None)
                    details["ci_open"] = NO_WIDTH
                else:
                    details["ci_method"] = "bootstrap"
                if ci[1] is not None and np.isinf(ci[1]):
                    ci = (ci[0], None)
                    details["ci_open"] = ("upper bound open: so many resamples hold no "
                                          "success that the cost per success has no finite "
                                          "upper bound")
            rows.append(metric_row(self.name, label, value, ci, len(idx),
                                   int(excluded[idx].sum()), len(inc) - unscored, unscored,
                                   details, undefined))
        return rows

