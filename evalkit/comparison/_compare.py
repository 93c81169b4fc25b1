"""Comparing two runs over the records they share: per metric row the change B − A, its
paired-bootstrap interval, a test of "no change" (McNemar's exact test where the row is a
rate paired per record, else the paired bootstrap), corrected for the number of rows, with
the smallest change the data could have detected beside a row that shows none; the records
that flipped; the judge/system split; and the regression gates."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.comparison._gate import GateConfig, gate_test
from evalkit.comparison._multiplicity import NAMES, adjust, lone_alpha
from evalkit.comparison._paired import Paired, flip_rows, paired_rows, split
from evalkit.comparison._recompute import Key, Row, RunTables, identity, samples, values
from evalkit.comparison._significance import (
    bootstrap_test,
    mcnemar_exact,
    mde_mcnemar,
    mde_normal,
    records_floor,
)
from evalkit.comparison._stacked import stackable, stacked_values
from evalkit.errors import EvalkitError

N_BOOT = 400
"""Paired resamples drawn first. Rows whose verdict is still within Monte-Carlo error of
the significance bar get more (doubling), up to ``max_boot``."""
MAX_BOOT = 3200
MC_Z = 3.0
"""A bootstrap p-value is settled when it lies more than this many Monte-Carlo standard
errors from the bar it is compared with: another seed then gives the same verdict, but
about once in 370 rows at the bar."""
MAX_UNDEFINED = 0.01
"""The share of resamples on which a metric may be undefined and still get an interval: the
percentile interval of the resamples where it is defined is the interval of another
statistic (the metric given that it is defined) once that share is not negligible."""
GATE_EXIT = 5
"""The exit code of ``evalkit compare`` (and of a run with ``runner.baseline``) when a
regression gate fails."""
_DERIVED_SUFFIXES = {".raw": "raw (before filters) of {}", ".filter_effect":
                     "raw minus filtered of {}"}


@dataclass
class Comparison:
    """What :func:`compare_runs` found. ``rows``: one per (metric, slice) both runs produce;
    ``flips``: records of a binary row whose outcome changed; ``gates``: one per gate."""

    run_a: Path
    run_b: Path
    n_shared: int
    confidence: float
    correction: str
    rows: list[dict[str, Any]]
    flips: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    # per corrected metric: the change of the label-corrected rate (PPI++ on paired
    # differences) beside the judge-only and labels-only ones (evalkit.comparison._corrected)
    corrected: list[dict[str, Any]] = field(default_factory=list)
    judge_changes: list[dict[str, Any]] = field(default_factory=list)
    """Per judge of both runs whose ``judgments.produced_by`` differs: what changed (model,
    prompt, config, versions), A's value and B's."""

    @property
    def failed_gates(self) -> list[dict[str, Any]]:
        """The gates that failed (a regression beyond tolerance, or not checkable)."""
        return [g for g in self.gates if not g["passed"]]

    @property
    def exit_code(self) -> int:
        """0, or :data:`GATE_EXIT` when a gate failed."""
        return GATE_EXIT if self.failed_gates else 0

    def summary(self) -> str:
        """One line: how many quantities changed, under which correction."""
        tested = [r for r in self.rows if r["p_adjusted"] is not None]
        sig = [r for r in tested if r["significant"]]
        return (f"{len(sig)} of {len(tested)} quantities changed at "
                f"{self.confidence:.0%} ({NAMES[self.correction]}); "
                f"{len(self.rows) - len(tested)} rows derived or without a test")


def _direction(delta: float, hib: bool | None) -> str:
    if hib is None:
        return "increase" if delta > 0 else "decrease"
    return "improvement" if (delta > 0) == hib else "regression"


class _Deltas:
    """Resampled changes per row, NaN where the metric was undefined on a resample."""

    def __init__(self, keys: list[Key]) -> None:
        self.parts: dict[Key, list[np.ndarray]] = {k: [] for k in keys}

    def add(self, key: Key, chunk: np.ndarray) -> None:
        self.parts[key].append(chunk)

    def all(self, key: Key) -> np.ndarray:
        parts = self.parts[key]
        return np.concatenate(parts) if parts else np.empty(0)


def compare_runs(run_a: Path, run_b: Path, *, n_boot: int = N_BOOT, max_boot: int = MAX_BOOT,
                 seed: int = 0, confidence: float = 0.95, only: list[str] | None = None,
                 correction: str = "holm", gates: list[GateConfig] | tuple[()] = (),
                 runs_dir: Path | None = None) -> Comparison:
    """Compare run B (the candidate) with run A (the baseline) over the records both hold.
    ``n_boot`` paired resamples are drawn, more (up to ``max_boot``) for the metrics with a
    verdict within Monte-Carlo error of the bar; ``correction`` is ``holm``, ``bh`` or
    ``none``; ``gates`` are checked at the same ``confidence``. ``runs_dir`` (default: the
    one holding ``run_a``) is where the ``corrected`` metrics' labels are read."""
    if correction not in NAMES:
        raise EvalkitError(f"compare: correction {correction!r} is not one of "
                           f"{', '.join(NAMES)}")
    with tempfile.TemporaryDirectory(prefix="evalkit-compare-") as tmp:
        a, b = RunTables(run_a, Path(tmp) / "a"), RunTables(run_b, Path(tmp) / "b")
        shared = sorted(a.ids & b.ids)
        if not shared:
            raise EvalkitError(f"compare: runs {run_a.name} and {run_b.name} share no "
                               "record_id; a paired comparison needs the same inputs")
        ma, mb = a.metrics(only=only), b.metrics(only=only)
        names = [n for n in ma if n in mb]  # (both already kept to `only`)
        if not names:
            raise EvalkitError("compare: the runs configure no metric in common"
                               + (f" among {only}" if only else ""))
        ma = {n: ma[n] for n in names}
        mb = {n: mb[n] for n in names}
        a.use(identity(shared))
        b.use(identity(shared))
        va, vb = values(a, ma), values(b, mb)
        keys = [k for k in va if k in vb]
        paired = paired_rows(a, b, ma, mb)
        changes = judge_changes(a, b)
        deltas = _Deltas(keys)
        failed: dict[str, str] = {}
        todo, count, round_, drawn = set(names), n_boot, 0, dict.fromkeys(names, 0)
        while todo and count > 0:
            sub_a = {n: ma[n] for n in names if n in todo}
            sub_b = {n: mb[n] for n in names if n in todo}
            mine = [k for k in keys if va[k].owner in todo]
            chunk = {k: np.full(count, np.nan) for k in mine}
            # the metrics whose slices stand apart: every resample of a block at once
            stack = set(stackable(a, sub_a)) & set(stackable(b, sub_b))
            if stack:
                xs = stacked_values(a, {n: sub_a[n] for n in stack},
                                    samples(shared, count, seed, round_), len(shared), count,
                                    failed)
                ys = stacked_values(b, {n: sub_b[n] for n in stack},
                                    samples(shared, count, seed, round_), len(shared), count,
                                    failed)
                for k in mine:
                    if va[k].owner in stack and k in xs and k in ys:
                        # NaN where either is undefined; beyond the float range, inf, which
                        # counts as undefined as well
                        with np.errstate(over="ignore"):
                            chunk[k] = ys[k] - xs[k]
                sub_a = {n: m for n, m in sub_a.items() if n not in stack}
                sub_b = {n: m for n, m in sub_b.items() if n not in stack}
            for i, sample in enumerate(samples(shared, count, seed, round_) if sub_a or sub_b
                                       else ()):
                a.use(sample)
                b.use(sample)
                sa, sb = values(a, sub_a, failed), values(b, sub_b, failed)
                for k in mine:
                    x, y = sa.get(k), sb.get(k)
                    if x is not None and y is not None and _finite(x.value) and \
                            _finite(y.value):
                        chunk[k][i] = y.value - x.value  # type: ignore[operator]
            for k in mine:
                deltas.add(k, chunk[k])
            for n in todo:
                drawn[n] += count
            result = _evaluate(keys, va, vb, deltas, paired, drawn, failed, len(shared),
                               confidence, correction, gates)
            unsettled = {va[k].owner for k in result.unsettled}
            todo = {n for n in unsettled if drawn[n] < max_boot and n not in failed}
            count = min(max(drawn[n] for n in todo), max_boot - max(drawn[n] for n in todo)) \
                if todo else 0
            round_ += 1
        if not n_boot:
            result = _evaluate(keys, va, vb, deltas, paired, drawn, failed, len(shared),
                               confidence, correction, gates)
    primary = {(r["metric"], r["slice"]) for r in result.rows if r["role"] == "primary"}
    flips = [f for k, p in paired.items() if p.binary and k[1] == "all" and k in primary
             for f in flip_rows(k, p, va[k].higher_is_better)]
    for row in result.rows:
        p = paired.get((row["metric"], row["slice"]))
        if p is not None and row["role"] == "primary":
            s = split(p, max(n_boot, 2_000), seed, confidence)
            row.update(judge_delta=s.judge, judge_ci_low=s.judge_ci[0],
                       judge_ci_high=s.judge_ci[1], system_delta=s.system,
                       system_ci_low=s.system_ci[0], system_ci_high=s.system_ci[1],
                       n_same_output=s.n_same)
    from evalkit.comparison._corrected import corrected_differences

    corrected = corrected_differences(run_a, run_b, runs_dir or run_a.parent.parent,
                                      confidence)
    return Comparison(run_a, run_b, len(shared), confidence, correction, result.rows, flips,
                      result.gates, corrected, changes)


def judge_changes(a: RunTables, b: RunTables) -> list[dict[str, Any]]:
    """What changed in each judge both runs ran, from ``judgments.produced_by``: one entry
    per judge and changed field (a run from before the column has none to compare)."""
    import json

    def producers(run: RunTables) -> dict[str, dict[str, Any]]:
        names = {r[0] for r in run.con.execute("DESCRIBE base_judgments").fetchall()}
        if "produced_by" not in names:
            return {}
        rows = run.con.execute("SELECT DISTINCT judge, produced_by FROM base_judgments WHERE "
                               "produced_by IS NOT NULL AND origin <> 'imported'").fetchall()
        return {judge: json.loads(text) for judge, text in rows}

    pa_, pb = producers(a), producers(b)
    return [{"judge": judge, "field": key, "a": pa_[judge].get(key), "b": pb[judge].get(key)}
            for judge in sorted(set(pa_) & set(pb))
            for key in sorted(set(pa_[judge]) | set(pb[judge]))
            if pa_[judge].get(key) != pb[judge].get(key)]


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _difference(x: float | None, y: float | None) -> float | None:
    """B − A where both are finite and so is their difference (-1.5e308 to 1.5e308 is not)."""
    if not (_finite(x) and _finite(y)):
        return None
    d = y - x  # type: ignore[operator]
    return d if math.isfinite(d) else None


@dataclass
class _Result:
    rows: list[dict[str, Any]]
    gates: list[dict[str, Any]]
    unsettled: set[Key]


def _derived(key: Key, row: Row) -> str | None:
    """Why a row is not a quantity of its own (a view of another), or None."""
    for suffix, what in _DERIVED_SUFFIXES.items():
        if key[0].endswith(suffix):
            return what.format(key[0][:-len(suffix)])
    if row.plugin == "crosstab":
        return f"a cell of crosstab {row.owner}"
    if row.plugin == "agreement" and key[0].endswith(".n"):
        return f"the count of pairs of {row.owner}"
    return None


def _same_quantity(keys: list[Key], va: dict[Key, Row], vb: dict[Key, Row],
                   boot: dict[Key, np.ndarray], primary: list[Key]) -> dict[Key, str]:
    """Rows that restate an earlier row of the same slice: equal values in both runs and an
    equal change on every resample (a duplicate), or 1 − its values and the opposite change
    (a pass rate beside its flag rate). Rows whose resampled change does not vary are never
    matched: two unrelated unchanged rows would look alike."""
    out: dict[Key, str] = {}
    seen: dict[str, list[Key]] = {}
    for k in primary:
        d = boot[k]
        fin = d[np.isfinite(d)]
        if len(fin) < 2 or np.ptp(fin) == 0:
            continue
        x, y = va[k].value, vb[k].value
        for j in seen.get(k[1], []):
            dj = boot[j]
            if len(dj) != len(d) or not np.array_equal(np.isnan(dj), np.isnan(d)):
                continue
            xj, yj = va[j].value, vb[j].value
            ok = np.isfinite(d)
            if _close(x, xj) and _close(y, yj) and np.allclose(d[ok], dj[ok], atol=1e-12):
                out[k] = f"the same quantity as {j[0]}"
                break
            if _close(x, 1 - xj) and _close(y, 1 - yj) and \
                    np.allclose(d[ok], -dj[ok], atol=1e-12):
                out[k] = f"1 − {j[0]}"
                break
        if k not in out:
            seen.setdefault(k[1], []).append(k)
    return out


def _close(x: float | None, y: float | None) -> bool:
    return x is not None and y is not None and abs(x - y) <= 1e-12


def _records(key: Key, va: dict[Key, Row], vb: dict[Key, Row], paired: dict[Key, Paired],
             n_shared: int) -> int:
    """The records behind a row's change: those paired in both runs for a per-record
    metric, else the fewer of the runs' own counts (``n_judged``), else every shared one."""
    if key in paired:
        return paired[key].n
    counts = [r.n for r in (va[key], vb[key]) if r.n is not None]
    return min(counts) if counts else n_shared


def _evaluate(keys: list[Key], va: dict[Key, Row], vb: dict[Key, Row], deltas: _Deltas,
              paired: dict[Key, Paired], drawn: dict[str, int], failed: dict[str, str],
              n_shared: int, confidence: float, correction: str,
              gates: list[GateConfig] | tuple[()]) -> _Result:
    from evalkit.metrics._stats import percentile_interval

    alpha = 1.0 - confidence
    rows: list[dict[str, Any]] = []
    boot = {k: deltas.all(k) for k in keys}
    derived = {k: why for k in keys if (why := _derived(k, va[k])) is not None}
    primary = [k for k in keys if k not in derived]
    derived.update(_same_quantity(keys, va, vb, boot, primary))
    tests: dict[Key, tuple[str, float, float]] = {}  # test, p, Monte-Carlo error
    n_rec = {k: _records(k, va, vb, paired, n_shared) for k in keys}
    for key in keys:
        x, y = va[key].value, vb[key].value
        d = boot[key]
        n_res = len(d)
        fin = d[np.isfinite(d)]
        row: dict[str, Any] = {
            "metric": key[0], "slice": key[1], "a": x, "b": y,
            "delta": _difference(x, y),
            "ci_low": None, "ci_high": None, "significant": None, "verdict": None,
            "p_value": None, "p_adjusted": None, "test": None, "mde": None,
            "role": "derived" if key in derived else "primary",
            "derived": derived.get(key), "higher_is_better": va[key].higher_is_better,
            "n_shared": n_shared, "n_pairs": None, "n_resamples": n_res,
            "mc_error": None, "judge_delta": None, "judge_ci_low": None,
            "judge_ci_high": None, "system_delta": None, "system_ci_low": None,
            "system_ci_high": None, "n_same_output": None, "note": None}
        owner = va[key].owner
        undefined = n_res - len(fin)
        if row["delta"] is None:
            row["note"] = ("no difference: the metric is undefined or infinite in a run"
                           if not (_finite(x) and _finite(y)) else
                           "no difference: B − A lies beyond the float range")
        elif owner in failed:
            row["note"] = (f"not resampled: metric '{owner}' failed on a resample "
                           f"({failed[owner]}); no interval")
        elif n_rec[key] < 2:
            # every resample of one record is that record: an interval of no width and a
            # p-value of 0 ("decrease (p = 0)" from a single record)
            row["note"] = (f"no interval: {n_rec[key]} record(s) behind this row, too few "
                           "to resample")
        elif n_res < 2:
            row["note"] = "no interval: fewer than 2 resamples (--n-boot)"
        elif undefined > MAX_UNDEFINED * n_res:
            row["note"] = (f"not resampled: undefined on {undefined} of {n_res} resamples "
                           "(a resample without the records it needs); no interval")
        else:
            lo, hi = percentile_interval(fin, alpha / 2)
            row.update(ci_low=lo, ci_high=hi)
        p = paired.get(key)
        if p is not None:
            row["n_pairs"] = p.n
        if row["role"] == "primary" and row["delta"] is not None:
            if p is not None and p.binary:
                worse, better = int(np.sum(p.b > p.a)), int(np.sum(p.b < p.a))
                tests[key] = ("mcnemar_exact", mcnemar_exact(worse, better), 0.0)
            elif row["ci_low"] is not None:
                t = bootstrap_test(fin)
                floor = records_floor(n_rec[key])
                # below the floor the bootstrap claims more than its records can show; the
                # floor is no draw, so it has no Monte-Carlo error
                tests[key] = (("paired_bootstrap", floor, 0.0) if floor > t.p_value else
                              ("paired_bootstrap", t.p_value, t.mc_error))
        rows.append(row)
    order = list(tests)
    adjusted = adjust([tests[k][1] for k in order], correction)
    family = len(order)
    lone = lone_alpha(alpha, family, correction)
    unsettled: set[Key] = set()
    by_key = {(r["metric"], r["slice"]): r for r in rows}
    for k, p_adj in zip(order, adjusted, strict=True):
        row = by_key[k]
        test, p_val, mc = tests[k]
        assert p_adj is not None
        sig = p_adj <= alpha
        row.update(test=test, p_value=p_val, p_adjusted=p_adj, significant=sig,
                   mc_error=mc if test == "paired_bootstrap" else None)
        if test == "mcnemar_exact":
            pk = paired[k]
            row["mde"] = mde_mcnemar(pk.n, int(np.sum(pk.a != pk.b)), lone)
        else:
            se = float(np.std(boot[k][np.isfinite(boot[k])], ddof=1))
            # a change that does not vary over the resamples has no spread to scale from
            row["mde"] = mde_normal(se, lone) if se > 0 else None
        bar = alpha * p_val / p_adj if p_adj > 0 else alpha
        settled = test != "paired_bootstrap" or abs(p_val - bar) > MC_Z * mc
        if not settled:
            unsettled.add(k)
        row["verdict"] = _verdict(row, family, correction, alpha)
        if not settled:
            row["verdict"] += (f"; unsettled at {row['n_resamples']} resamples (p = "
                               f"{p_val:.3g} ± {mc:.2g}): raise --max-boot")
    for row in rows:
        if row["role"] == "derived":
            row["verdict"] = f"derived: {row['derived']}; not tested separately"
        elif row["verdict"] is None:
            row["verdict"] = "no verdict: " + (row["note"] or "no test")
    gate_rows = _gates(gates, by_key, boot, paired, n_rec, alpha, correction, unsettled)
    return _Result(rows, gate_rows, unsettled)


def _verdict(row: dict[str, Any], family: int, correction: str, alpha: float) -> str:
    """The words of a tested row: the change and its direction when significant after the
    correction, else "no evidence of a change" with the smallest change the data could have
    detected (or why it cannot be said)."""
    p, p_adj = row["p_value"], row["p_adjusted"]
    if row["significant"]:
        return (f"{_direction(row['delta'], row['higher_is_better'])} (p = {p_adj:.2g}, "
                f"{correction} over {family} rows)")
    if row["mde"] is None:
        return "no evidence of a change (B − A is the same on every resample)"
    words = f"no evidence of a change (smallest detectable: ±{row['mde']:.3g})"
    if p <= alpha:  # significant alone, not once every row is counted: say so
        words = (f"no evidence of a change once {family} rows are counted (p = {p:.2g} "
                 f"alone, {p_adj:.2g} {correction}); smallest detectable: ±{row['mde']:.3g}")
    return words


def _gates(gates: list[GateConfig] | tuple[()], by_key: dict[Key, dict[str, Any]],
           boot: dict[Key, np.ndarray], paired: dict[Key, Paired], n_rec: dict[Key, int],
           alpha: float, correction: str, unsettled: set[Key]) -> list[dict[str, Any]]:
    """Each gate's result; the one-sided tests are corrected together (``correction``)."""
    out: list[dict[str, Any]] = []
    tests: list[float | None] = []
    for gate in gates:
        key = (gate.metric, gate.slice)
        row = by_key.get(key)
        if row is None:
            available = sorted({m for m, _ in by_key})
            raise EvalkitError(f"gate {gate}: no row '{gate.metric}' (slice {gate.slice}) in "
                               f"both runs; metrics compared: {', '.join(available)}")
        worse = gate.worse or {False: "up", True: "down"}.get(row["higher_is_better"])
        shown = replace(gate, worse=worse) if worse else gate
        res: dict[str, Any] = {"gate": str(shown), "metric": gate.metric, "slice": gate.slice,
                               "worse": worse, "tolerance": gate.tolerance,
                               "delta": row["delta"], "ci_low": row["ci_low"],
                               "ci_high": row["ci_high"], "test": None, "p_value": None,
                               "p_adjusted": None, "passed": False, "verdict": None}
        out.append(res)
        if worse is None:
            res["verdict"] = (f"not checked: {gate.metric} has no direction that is worse; "
                              f"write {gate.metric}:+{gate.tolerance:g} or "
                              f"{gate.metric}:-{gate.tolerance:g}")
            tests.append(None)
            continue
        if row["ci_low"] is None:
            res["verdict"] = f"not checked: {row['note'] or 'no interval'}"
            tests.append(None)
            continue
        sign = 1.0 if worse == "up" else -1.0
        p = paired.get(key)
        flips = None
        if p is not None and p.binary:
            bad = int(np.sum(sign * (p.b - p.a) > 0))
            flips = (bad, int(np.sum(p.a != p.b)) - bad)
        d = boot[key]
        test, p_value, mc = gate_test(gate.tolerance, sign * d[np.isfinite(d)], flips,
                                      n_rec[key])
        res.update(test=test, p_value=p_value)
        if abs(p_value - alpha / 2) <= MC_Z * mc:
            unsettled.add(key)
        tests.append(res["p_value"])
    for res, p_adj in zip(out, adjust(tests, correction), strict=True):
        if p_adj is None:
            continue
        res["p_adjusted"] = p_adj
        res["passed"] = p_adj > alpha / 2
        moved = "rose" if res["worse"] == "up" else "fell"
        span = f"[{res['ci_low']:.3g}, {res['ci_high']:.3g}]"
        if res["passed"]:
            res["verdict"] = (f"pass: no evidence that {res['metric']} {moved} by more than "
                              f"{res['tolerance']:g} (B − A = {res['delta']:.3g} {span})")
        else:
            res["verdict"] = (f"FAIL: {res['metric']} {moved} by {abs(res['delta']):.3g} "
                              f"{span}, beyond the tolerance {res['tolerance']:g} "
                              f"(p = {p_adj:.2g}, {correction})")
    return out
