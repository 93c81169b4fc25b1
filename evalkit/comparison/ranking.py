"""Ranking runs on the same records by one metric (a sweep over candidates: ``evalkit run -m
... generate.model=a,b,c``), shared by the sweep's closing table and its report page.

Each run's value and interval are the metric's own (its config, its interval method: Wilson's
for a rate), computed on the candidate side of a shadow run (``RUN:candidate``) or on the
whole run otherwise. Every pair of runs is compared paired, record by record, with
:func:`~evalkit.comparison.compare_runs` (McNemar's exact test for a rate, the paired
bootstrap otherwise), and the pairs' p-values are corrected together (Holm by default).

Ranks are stated as ranges, not as a bare order: a run's best rank is 1 + the number of runs
significantly better than it, its worst the number of ranked runs less those significantly
worse. Under Holm's correction the chance of any false verdict among the pairs is at most
1 − confidence (the family-wise error rate; for the direction of a verdict too, Shaffer
1980, with independent tests), so the ranges hold together: every run's true rank lies in
its range at once. Under Benjamini–Hochberg they only bound the share of false verdicts.
Runs whose range includes 1 are "not distinguishable from #1"."""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import EvalkitError

__all__ = ["RankedRun", "Ranking", "default_metric", "rank_runs", "rank_sweep"]

_TESTS = {"mcnemar_exact": "McNemar's exact test", "paired_bootstrap": "paired bootstrap"}
_SHORT = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no correction"}


@dataclass
class RankedRun:
    """One run in a :class:`Ranking`: its value and interval on the ranked side, and the
    range of ranks the paired tests allow (None when the run has no value)."""

    run_dir: Path
    run_id: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None  # records the value is over (n_judged)
    rank_low: int | None = None
    rank_high: int | None = None
    note: str | None = None  # why there is no value, or no rank

    @property
    def rank(self) -> str:
        """``"1"``, or ``"1–2"`` when the tests do not tell it apart from its neighbours."""
        if self.rank_low is None or self.rank_high is None:
            return "—"
        return str(self.rank_low) if self.rank_low == self.rank_high else \
            f"{self.rank_low}–{self.rank_high}"


@dataclass
class Ranking:
    """Runs ordered best first by ``metric`` (slice ``all``) on ``side``; ``pairs`` holds each
    pair's paired comparison: ``a``, ``b`` (run ids), ``delta`` (b − a) and its interval,
    ``test``, ``p_value``, ``p_adjusted`` (over the pairs), ``significant``, ``better`` (the
    run id that is significantly better, or None), ``n_pairs``."""

    metric: str
    side: str | None
    higher_is_better: bool
    confidence: float
    correction: str
    runs: list[RankedRun]
    pairs: list[dict[str, Any]] = field(default_factory=list)
    why_metric: str = ""

    def tests(self) -> str:
        """The tests the pairs used, in words."""
        used = list(dict.fromkeys(_TESTS.get(p["test"], p["test"]) for p in self.pairs
                                  if p["test"]))
        return " / ".join(used) or "no test"

    def caption(self) -> str:
        """One sentence: what the ranking is by and what a rank range means."""
        side = f", {self.side} side" if self.side else ""
        way = "higher" if self.higher_is_better else "lower"
        tested = sum(1 for p in self.pairs if p["p_adjusted"] is not None)
        return (f"ranked by {self.metric}{side} ({way} is better); a rank a–b: not "
                f"distinguishable at {self.confidence:.0%} ({self.tests()}, "
                f"{_SHORT[self.correction]} over {tested} pair{'' if tested == 1 else 's'})")

    def versus_first(self, entry: RankedRun) -> str:
        """How ``entry`` stands against the run ranked first, in words."""
        first = self.runs[0]
        if entry is first or entry.rank_low is None:
            return "" if entry is first else (entry.note or "no value")
        pair = self.pair(first.run_id, entry.run_id)
        if pair is None or pair["p_adjusted"] is None:
            return "not tested against #1: " + ((pair or {}).get("note") or "no paired test")
        if pair["better"] == first.run_id:
            return f"worse than #1 (p = {pair['p_adjusted']:.2g}, {self.correction})"
        if pair["better"] == entry.run_id:  # (a paired test against the order of the values)
            return f"better than #1 on the shared records (p = {pair['p_adjusted']:.2g})"
        return f"not distinguishable from #1 (p = {pair['p_adjusted']:.2g}, {self.correction})"

    def pair(self, a: str, b: str) -> dict[str, Any] | None:
        """The comparison of runs ``a`` and ``b`` (either order)."""
        return next((p for p in self.pairs if {p["a"], p["b"]} == {a, b}), None)


def _sides(run_dir: Path) -> set[str]:
    import pyarrow.parquet as pq

    path = run_dir / "records.parquet"
    if not path.exists() or "side" not in pq.read_schema(path).names:
        return set()
    return {s for s in pq.read_table(path, columns=["side"]).column("side").unique().to_pylist()
            if s is not None}


def _owner(row: str, metrics: dict[str, Any]) -> str | None:
    """The metric instance that writes row ``row`` (``latency`` for ``latency.p95``)."""
    owners = [n for n in metrics if row == n or row.startswith(n + ".")]
    return max(owners, key=len) if owners else None


def default_metric(config: dict[str, Any]) -> tuple[str | None, str]:
    """The metric row a run's ``config`` is ranked by when ``sweep.rank_by`` is not set, and
    why: the first alert's metric, else the first ``rate`` metric (the share its judge
    flags or passes), else None."""
    metrics = config.get("metrics") or {}
    for alert in config.get("alerts") or []:
        name = str((alert or {}).get("metric") or "")
        if _owner(name, metrics):
            return name, "the first alert's metric"
    for name, spec in metrics.items():
        if isinstance(spec, dict) and spec.get("plugin") == "rate":
            return name, "the first rate metric"
    return None, ""


def _own_row(view: Path, owner: str, metric: str, scratch: Path) -> dict[str, Any] | None:
    """The row ``(metric, all)`` of ``owner`` computed on ``view`` as the run computes it
    (its own interval)."""
    from evalkit.comparison._recompute import RunTables, identity
    from evalkit.results.schemas import METRICS, conform

    tables = RunTables(view, scratch)
    try:
        plugins = tables.metrics(inner_ci=True, only=[owner])
        tables.use(identity(sorted(tables.ids)))
        plugin = plugins[owner]
        rows = conform(plugin.compute(tables.con), METRICS, {"metric": owner}).to_pylist()
    finally:
        tables.con.close()
    row = next((r for r in rows if r["metric"] == metric and r["slice"] == "all"), None)
    if row is not None and row.get("higher_is_better") is None:
        row["higher_is_better"] = getattr(plugin, "higher_is_better", None)
    if row is None:
        names = sorted({r["metric"] for r in rows})
        raise EvalkitError(f"sweep.rank_by: metric '{owner}' writes no row '{metric}'; its "
                           f"rows: {', '.join(names)}")
    return row


def rank_runs(run_dirs: list[Path], metric: str, *, higher_is_better: bool | None = None,
              correction: str = "holm", confidence: float = 0.95, n_boot: int = 400,
              seed: int = 0, why_metric: str = "") -> Ranking:
    """Rank ``run_dirs`` (finished runs on the same records) by the metric row ``metric``
    (slice ``all``): on their candidate side when every run is a shadow run, else on the
    whole run. Runs that did not finish, or have no value, are listed last, unranked, with
    the reason. ``n_boot``: paired resamples per pair (the interval of each difference)."""
    from evalkit.comparison._compare import compare_runs
    from evalkit.comparison._multiplicity import adjust
    from evalkit.comparison.sides import side_view
    from evalkit.results.runfiles import load_manifest

    run_dirs = [Path(d) for d in run_dirs]
    manifests = [load_manifest(d) for d in run_dirs]
    ok = [i for i, m in enumerate(manifests) if m.get("status") == "ok"]
    sides = [_sides(run_dirs[i]) for i in ok]
    side = "candidate" if ok and all("candidate" in s for s in sides) else None
    if side is None and any("candidate" in s for s in sides):
        raise EvalkitError("ranking: some runs have a candidate side and some do not; rank "
                           "runs of one kind (all shadow runs, or none)")
    entries: list[RankedRun] = []
    views: dict[str, tuple[Path, str]] = {}  # run id -> (its ranked view, metric instance)
    direction = higher_is_better
    with tempfile.TemporaryDirectory(prefix="evalkit-rank-") as tmp:
        scratch = Path(tmp)
        for i, (run_dir, manifest) in enumerate(zip(run_dirs, manifests, strict=True)):
            run_id = str(manifest.get("run_id") or run_dir.name)
            if i not in ok:
                entries.append(RankedRun(run_dir, run_id, None, None, None, None,
                                         note=f"not ranked: status {manifest.get('status')}"))
                continue
            owner = _owner(metric, (manifest.get("config") or {}).get("metrics") or {})
            if owner is None:
                raise EvalkitError(f"sweep.rank_by: run {run_id} has no metric '{metric}'; "
                                   "name a metric row of every run (echo_rate, latency.p95)")
            view = side_view(run_dir, side, scratch / f"v{i}") if side else run_dir
            row = _own_row(view, owner, metric, scratch / f"r{i}")
            if direction is None:
                direction = row.get("higher_is_better")
            value = row["value"]
            if value is not None and not math.isfinite(value):
                value = None  # (an infinite value has no place in an order)
            entry = RankedRun(run_dir, run_id, value, row["ci_low"], row["ci_high"],
                              row.get("n_judged"))
            if value is None:
                details = json.loads(row.get("details") or "{}")
                entry.note = "no value: " + str(details.get("undefined") or details.get(
                    "infinite") or "undefined or infinite")
            else:
                views[run_id] = (view, owner)
            entries.append(entry)
        if direction is None:
            raise EvalkitError(f"sweep.rank_by: metric '{metric}' does not say whether higher "
                               "is better; set sweep.higher_is_better=true or false")
        valued = [e for e in entries if e.value is not None]
        valued.sort(key=lambda e: -e.value if direction else e.value)  # type: ignore[operator]
        pairs: list[dict[str, Any]] = []
        for a, b in itertools.combinations(valued, 2):
            pair: dict[str, Any] = {"a": a.run_id, "b": b.run_id, "delta": None,
                                    "ci_low": None, "ci_high": None, "test": None,
                                    "p_value": None, "p_adjusted": None, "significant": None,
                                    "better": None, "n_pairs": None, "note": None}
            pairs.append(pair)
            try:
                result = compare_runs(views[a.run_id][0], views[b.run_id][0], n_boot=n_boot,
                                      max_boot=max(n_boot, 8 * n_boot), seed=seed,
                                      confidence=confidence, only=[views[a.run_id][1]],
                                      correction="none", runs_dir=a.run_dir.parent.parent)
            except EvalkitError as exc:
                pair["note"] = str(exc)
                continue
            row = next((r for r in result.rows if r["metric"] == metric
                        and r["slice"] == "all"), None)
            if row is None or row["p_value"] is None:
                pair["note"] = (row or {}).get("note") or "no paired test"
                continue
            pair.update(delta=row["delta"], ci_low=row["ci_low"], ci_high=row["ci_high"],
                        test=row["test"], p_value=row["p_value"],
                        n_pairs=row["n_pairs"] or result.n_shared)
    alpha = 1.0 - confidence
    for pair, p_adj in zip(pairs, adjust([p["p_value"] for p in pairs], correction),
                           strict=True):
        if p_adj is None:
            continue
        pair["p_adjusted"] = p_adj
        pair["significant"] = p_adj <= alpha
        if pair["significant"]:
            b_up = pair["delta"] > 0
            pair["better"] = pair["b"] if b_up == direction else pair["a"]
    n = len(valued)
    for e in valued:
        mine = [p for p in pairs if e.run_id in (p["a"], p["b"]) and p["better"]]
        above = sum(1 for p in mine if p["better"] != e.run_id)
        below = sum(1 for p in mine if p["better"] == e.run_id)
        e.rank_low, e.rank_high = 1 + above, n - below
    unranked = [e for e in entries if e.value is None]
    return Ranking(metric, side, bool(direction), confidence, correction, valued + unranked,
                   pairs, why_metric)


def rank_sweep(run_dirs: list[Path], n_boot: int = 400) -> Ranking | None:
    """The ranking of a sweep's (or a multi-run report's) runs under the first finished
    run's ``sweep:`` settings: by ``sweep.rank_by``, or (shadow runs only, which compare
    candidates) by :func:`default_metric`. None when there is nothing to rank: fewer than
    two finished runs, runs that are not shadow runs and no ``rank_by``, or no metric to
    rank by."""
    from evalkit.results.runfiles import load_manifest

    run_dirs = [Path(d) for d in run_dirs]
    manifests = [load_manifest(d) for d in run_dirs]
    finished = [d for d, m in zip(run_dirs, manifests, strict=True) if m.get("status") == "ok"]
    if len(finished) < 2:
        return None
    config = next(m.get("config") or {} for m in manifests if m.get("status") == "ok")
    settings = config.get("sweep") or {}
    metric, why = settings.get("rank_by"), "sweep.rank_by"
    if metric is None:
        shadow = [(m.get("config") or {}).get("generate") for m in manifests
                  if m.get("status") == "ok"]
        # (the manifests first: reading every run's records is for shadow runs alone)
        if not all(shadow) or not all("candidate" in _sides(d) for d in finished):
            return None
        metric, why = default_metric(config)
        if metric is None:
            return None
    return rank_runs(run_dirs, str(metric), higher_is_better=settings.get("higher_is_better"),
                     correction=settings.get("correction") or "holm",
                     confidence=float(settings.get("confidence") or 0.95), n_boot=n_boot,
                     why_metric=why)
