"""``repeatability``: how far a judge agrees with itself when it judges the same record again
(``runner.repeats``): the share of records whose verdict flipped between repeats, Fleiss'
kappa across repeats, the within-record spread of the scores, and the flag rate over every
repeat. Repeats of a record are not independent: the intervals of kappa and spread resample
records, each with all its repeats (a cluster bootstrap); the flag rate's is Wilson's at the
effective size of a proportion clustered in records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.checks import check_flag_at
from evalkit.metrics._intervals import clustered_proportion_ci
from evalkit.metrics._pair_statistics import NO_WIDTH, records_interval
from evalkit.metrics._signals import SliceConfig, index_slices, metric_row
from evalkit.metrics._stats import slice_sql, wilson_ci
from evalkit.plugin import Metric, Produces

__all__ = ["RepeatabilityConfig", "RepeatabilityMetric", "fleiss_kappa"]

STATISTICS = ("flip_rate", "kappa", "spread", "rate")


@dataclass(frozen=True)
class RepeatabilityConfig(SliceConfig):
    judge: str = "???"  # the judge instance whose repeats are compared
    threshold: float | None = None  # flagged when value > threshold (flag_at); null: passed false
    flag_at: str = ">"  # a score at the threshold: ">" not flagged, ">=" flagged

    def validate(self) -> None:
        super().validate()
        check_flag_at(self.flag_at)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of ``counts`` (subjects × categories, each row summing to the same
    number of ratings m ≥ 2), as ``statsmodels.stats.inter_rater.fleiss_kappa``; NaN when
    every rating falls in one category (chance agreement is then 1)."""
    n, m = counts.shape[0], counts[0].sum()
    p_cat = counts.sum(axis=0) / (n * m)
    p_subject = ((counts * counts).sum(axis=1) - m) / (m * (m - 1))
    chance = float((p_cat * p_cat).sum())
    if chance >= 1.0:
        return float("nan")
    return float((p_subject.mean() - chance) / (1.0 - chance))


def _repeat_key(repeat: tuple[float | None, float]) -> tuple[bool, float, float]:
    """A total order on one repeat's (score, flag): a missing score last."""
    value, flagged = repeat
    return value is None, 0.0 if value is None else value, flagged


class RepeatabilityMetric(Metric):
    """Rows ``NAME.flip_rate`` (records whose verdict differs between repeats, among those
    judged at least twice; Wilson interval), ``NAME.kappa`` (Fleiss' kappa of the verdicts
    over the records with every repeat usable), ``NAME.spread`` (mean within-record
    standard deviation of the scores) and ``NAME.rate`` (the flag rate over every repeat;
    Wilson's interval at its effective size, the repeats of a record being a cluster), per
    slice; kappa and spread with cluster-bootstrap intervals over records."""

    Config = RepeatabilityConfig
    higher_is_better = None
    thread_safe = True

    def produces(self) -> Produces:
        return Produces(tuple(f"{self.name}.{s}" for s in STATISTICS),
                        slice_by=tuple(self.config.slice_by))

    def _load(self, con: Any) -> tuple[Any, dict[str, list[tuple[float | None, float]]]]:
        cfg = self.config
        cols = ", ".join(slice_sql(c, "r") for c in dict.fromkeys(["excluded_by",
                                                                    *cfg.slice_by]))
        records = con.execute(f"SELECT r.record_id, {cols} FROM records r").to_arrow_table()
        op = ">=" if cfg.flag_at == ">=" else ">"
        flag = ("NOT passed" if cfg.threshold is None
                else f"value {op} {float(cfg.threshold)!r}")
        # a connection without the repeats view (a run read by other means) has repeat 0 only
        (has_repeats,) = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = "
                                     "'repeats' AND NOT internal").fetchone()
        (has_table,) = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = "
                                   "'repeats'").fetchone()
        every = ("(SELECT * FROM judgments UNION ALL BY NAME SELECT * FROM repeats)"
                 if has_repeats or has_table else "judgments")
        rows = con.execute(
            f"SELECT record_id, value, CAST({flag} AS DOUBLE) FROM {every} WHERE judge = ? "
            "AND status = 'ok' ORDER BY record_id", [cfg.judge]).fetchall()
        by_record: dict[str, list[tuple[float | None, float]]] = {}
        for rid, value, flagged in rows:
            if flagged is not None:
                by_record.setdefault(rid, []).append((value, flagged))
        return records, by_record

    def compute(self, con: Any) -> list[dict[str, Any]]:
        cfg = self.config
        records, by_record = self._load(con)
        ids = records.column("record_id").to_pylist()
        excluded = np.asarray(records.column("excluded_by").is_valid().to_numpy(
            zero_copy_only=False), dtype=bool)
        k = max((len(v) for v in by_record.values()), default=0)
        rows = []
        for label, idx in index_slices(records, list(cfg.slice_by)):
            # each record's repeats sorted, the records sorted by them: the cluster
            # bootstrap's draws (and the sums' bits) are then a function of the repeats, not
            # of the order a run, a merge of shards or a resume wrote them in, nor of the ids
            kept = [ids[i] for i in idx if not excluded[i]]
            judged = sorted((sorted(by_record[r], key=_repeat_key) for r in kept
                             if len(by_record.get(r, ())) >= 2),
                            key=lambda reps: [_repeat_key(x) for x in reps])
            counts = dict(n_attempted=len(idx), n_excluded=int(excluded[idx].sum()),
                          n_judged=len(judged), n_unscored=len(kept) - len(judged))
            rows += self._rows(label, judged, k, counts)
        return rows

    def _rows(self, label: str, judged: list[list[tuple[float | None, float]]], k: int,
              counts: dict[str, int]) -> list[dict[str, Any]]:
        cfg, name = self.config, self.name
        why = ("no record judged twice or more in this slice (runner.repeats)" if k >= 2
               else f"judge '{cfg.judge}' judged each record once; set runner.repeats=2 or "
                    "more")
        flags = [np.array([f for _, f in r]) for r in judged]
        flipped = np.array([float(np.ptp(f) > 0) for f in flags])
        out = []
        if len(flipped):
            ones = int(flipped.sum())
            out.append(metric_row(f"{name}.flip_rate", label, ones / len(flipped),
                                  wilson_ci(ones, len(flipped), cfg.confidence)
                                  if cfg.n_boot else (None, None), **counts,
                                  details={**({"ci_method": "wilson"} if cfg.n_boot else {}),
                                           "repeats": k, "what": "share of records whose "
                                           "verdict differs between repeats"}))
        else:
            out.append(metric_row(f"{name}.flip_rate", label, None, (None, None), **counts,
                                  details={}, undefined=why))
        full = np.array([[f.sum(), len(f) - f.sum()] for f in flags if len(f) == k])
        kappa_why = why if not len(full) else (
            "kappa undefined: every verdict in every repeat is the same")
        values = [np.array([v for v, _ in r if v is not None], dtype=float) for r in judged]
        spreads = np.array([v.std(ddof=1) for v in values if len(v) >= 2])
        sums = np.array([f.sum() for f in flags], dtype=float)
        sizes = np.array([len(f) for f in flags], dtype=float)
        stats = {
            "kappa": (lambda i: fleiss_kappa(full[i]), len(full), kappa_why,
                      f"Fleiss' kappa of the verdicts across {k} repeats"),
            "spread": (lambda i: float(spreads[i].mean()), len(spreads),
                       "no record with two usable scores in this slice",
                       "mean within-record standard deviation of the scores"),
        }
        for stat, (fn, n, undefined, what) in stats.items():
            value = fn(np.arange(n)) if n else None
            ci, how = records_interval(
                fn, n, value, cfg.n_boot, cfg.seed, cfg.confidence,
                "cluster bootstrap (records)",
                "every record's spread is equal: no spread to resample (an interval of no "
                "width says nothing)" if stat == "spread" else NO_WIDTH)
            out.append(metric_row(f"{name}.{stat}", label, value, ci, **counts,
                                  details={**how, "repeats": k, "what": what},
                                  undefined=undefined))
        # the flag rate over every repeat is a proportion pooled over records (clusters of
        # repeats): Wilson's interval at the ratio's effective size, as citation precision;
        # the cluster bootstrap of 0 flags in 12 judgments resampled to [0, 0]
        rate = float(sums.sum() / sizes.sum()) if len(sums) else None
        ci = clustered_proportion_ci(sums, sizes, cfg.confidence) \
            if rate is not None and cfg.n_boot else (None, None)
        out.append(metric_row(f"{name}.rate", label, rate, ci, **counts,
                              details={**({"ci_method": "wilson (effective n)"}
                                          if cfg.n_boot else {}), "repeats": k,
                                       "what": "share of judgments flagged, over every "
                                               "repeat"}, undefined=why))
        return out
