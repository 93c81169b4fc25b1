"""Per-record outcomes of the metrics that are a mean over records (``rate``: a 0/1 per
record; ``mean``: a judge's value per record), read from both runs and paired by record.

They give what a recomputed metric alone cannot: McNemar's exact test on the records that
flipped, the list of those records (regressed, improved), and the split of a change into
the part on records whose output is byte-identical in both runs (the judge changed: model,
prompt, version) and the rest (the system changed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.comparison._recompute import Key, RunTables


def _rate(table: pa.Table, cfg: Any) -> pa.Array:
    from evalkit.metrics.rate import flags

    return flags(table, cfg)


def _mean(table: pa.Table, cfg: Any) -> pa.Array:
    ok = pc.fill_null(pc.equal(table.column("status"), "ok"), False)
    return pc.if_else(ok, table.column("value"), pa.scalar(None, pa.float64()))


PER_RECORD: dict[str, Callable[[pa.Table, Any], pa.Array]] = {"rate": _rate, "mean": _mean}
"""Metric plugins whose filtered value is the mean over included records of a per-record
score, and that score."""


@dataclass
class Paired:
    """One metric row's per-record scores in both runs, over the records both scored."""

    record_ids: np.ndarray  # object array of ids
    a: np.ndarray
    b: np.ndarray
    same_output: np.ndarray  # bool: the record's output is byte-identical in both runs
    binary: bool  # every score is 0 or 1 (a rate)

    @property
    def n(self) -> int:
        return len(self.a)


def _scores(run: RunTables, metric: Any, plugin: str) -> dict[str, dict[str, float]]:
    """slice label -> record_id -> score, over included records with a usable score."""
    from evalkit.metrics._signals import index_slices, judgment_join
    from evalkit.metrics._stats import slice_sql

    cfg = metric.config
    cols = ", ".join(slice_sql(c, "r") for c in dict.fromkeys(["excluded_by", *cfg.slice_by]))
    join, params = judgment_join(run.con, cfg.judge, ["value", "passed", "label"], "j")
    table = run.con.execute(f"SELECT r.record_id, {cols}, j.value, j.passed, j.label, "
                            f"j.status FROM records r {join}", params).to_arrow_table()
    score = np.asarray(PER_RECORD[plugin](table, cfg).to_numpy(zero_copy_only=False),
                       dtype=float)
    ids = np.asarray(table.column("record_id").to_pylist(), dtype=object)
    usable = ~np.isnan(score) & np.asarray(
        table.column("excluded_by").is_null().to_numpy(zero_copy_only=False), dtype=bool)
    out = {}
    for label, idx in index_slices(table, list(cfg.slice_by)):
        keep = idx[usable[idx]]
        out[label] = dict(zip(ids[keep].tolist(), score[keep].tolist(), strict=True))
    return out


def _outputs(run: RunTables) -> dict[str, str | None]:
    return dict(run.con.execute("SELECT record_id, output FROM records").fetchall())


def paired_rows(a: RunTables, b: RunTables, ma: dict[str, Any], mb: dict[str, Any],
                ) -> dict[Key, Paired]:
    """The per-record pairs of every filtered row of a per-record metric (see
    :data:`PER_RECORD`) that both runs configure with the same plugin. ``a`` and ``b`` hold
    the shared records once each (the identity sample)."""
    out: dict[Key, Paired] = {}
    names = [n for n in ma if n in mb and a.plugin_of.get(n) in PER_RECORD
             and a.plugin_of.get(n) == b.plugin_of.get(n)
             and getattr(ma[n].config, "judge", None) and getattr(mb[n].config, "judge", None)]
    if not names:
        return out
    out_a, out_b = _outputs(a), _outputs(b)
    for name in names:
        plugin = a.plugin_of[name]
        sa, sb = _scores(a, ma[name], plugin), _scores(b, mb[name], plugin)
        for label in sa:
            if label not in sb:
                continue
            ids = sorted(set(sa[label]) & set(sb[label]))
            xa = np.array([sa[label][i] for i in ids], dtype=float)
            xb = np.array([sb[label][i] for i in ids], dtype=float)
            same = np.array([out_a.get(i) == out_b.get(i) and out_a.get(i) is not None
                             for i in ids], dtype=bool)
            binary = bool(np.all((xa == 0) | (xa == 1)) and np.all((xb == 0) | (xb == 1))) \
                and plugin == "rate"
            out[(name, label)] = Paired(np.array(ids, dtype=object), xa, xb, same, binary)
    return out


@dataclass(frozen=True)
class Split:
    """A paired change B − A over n records, cut in two: ``judge`` is the sum of the changes
    on records whose output is byte-identical, divided by n (only the judge could move
    them), ``system`` the rest; judge + system = the paired change. Both are None when no
    record is in both runs (a slice each run fills with other records)."""

    judge: float | None
    judge_ci: tuple[float, float] | tuple[None, None]
    system: float | None
    system_ci: tuple[float, float] | tuple[None, None]
    n_same: int
    n_changed: int


def split(p: Paired, n_boot: int, seed: int, confidence: float) -> Split:
    """:class:`Split` of ``p``, with percentile intervals from ``n_boot`` paired resamples of
    the records (both parts from the same resamples)."""
    from evalkit.comparison._recompute import draws

    with np.errstate(over="ignore"):
        d = p.b - p.a
    n = p.n
    judge_part = np.where(p.same_output, d, 0.0)
    system_part = np.where(p.same_output, 0.0, d)
    if n == 0 or not np.all(np.isfinite(d)):  # (a change beyond the float range: no split)
        return Split(None, (None, None), None, (None, None), int(p.same_output.sum()),
                     int((~p.same_output).sum()))
    jj, ss = float(judge_part.sum() / n), float(system_part.sum() / n)
    if n < 2 or n_boot < 2:
        return Split(jj, (None, None), ss, (None, None), int(p.same_output.sum()),
                     int((~p.same_output).sum()))
    bj, bs = [], []
    for idx in draws(n, n_boot, seed, 1_000):  # a stream of its own
        bj.append(judge_part[idx].mean(axis=1))
        bs.append(system_part[idx].mean(axis=1))
    alpha = (1 - confidence) / 2
    qj = np.quantile(np.concatenate(bj), [alpha, 1 - alpha])
    qs = np.quantile(np.concatenate(bs), [alpha, 1 - alpha])
    return Split(jj, (float(qj[0]), float(qj[1])), ss, (float(qs[0]), float(qs[1])),
                 int(p.same_output.sum()), int((~p.same_output).sum()))


def flip_rows(key: Key, p: Paired, higher_is_better: bool | None) -> list[dict[str, Any]]:
    """The records of a binary row that flipped between the runs: ``regressed`` when the
    record moved the bad way (a flag raised on a rate where flagged is bad), ``improved``
    otherwise; ``changed`` without a direction."""
    moved = np.flatnonzero(p.a != p.b)
    rows = []
    for i in moved:
        up = p.b[i] > p.a[i]
        change = "changed" if higher_is_better is None else (
            "improved" if up == higher_is_better else "regressed")
        # (the ids of the sample of every record once carry its copy number, #0)
        rows.append({"metric": key[0], "slice": key[1],
                     "record_id": p.record_ids[i].rsplit("#", 1)[0],
                     "a": float(p.a[i]), "b": float(p.b[i]), "change": change,
                     "same_output": bool(p.same_output[i])})
    return rows
