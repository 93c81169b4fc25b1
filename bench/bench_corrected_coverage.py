"""Are the corrected intervals valid? From fully human-labelled data (the bundled HaluEval and
BEGIN samples, 300 records each, judged by the judge_agreement experiment's offline judges;
and FRANK, 2,246 summaries with two automatic factuality metrics as judges, in bench/data),
draw label samples of a share of the records with each design `evalkit label sample` offers,
estimate the human rate (or mean) and count how often each interval covers the truth.

The issue's design is the default (``--population finite``): each draw labels a share of
the data's own records and asks for their all-labels mean (the truth a census of human
labels would give, the estimand of the ``corrected`` metric). The goal is judged in this
framing. ``--population super`` first makes each run of N records drawn with replacement
from the data (the data is then the process, its all-labels mean the truth) and uses the
IPW interval for the process mean (``finite=False``); it is printed for information.
PPI++'s interval (ppi_py's) is the process one in both: for the records' mean it is
conservative by the spread of their mean around the process's (at a 10% share, about a
point at 90%).

Designs, each drawn by `evalkit.labels.sampling.draw_indices` (the probabilities checked
are the ones the sampler realises): random (PPI++, Rogan–Gladen, labels alone by Wilson),
stratified by the judge's verdict with Neyman allocation (IPW), active (Poisson, more
probability where the judge's score is least certain; IPW). Printed per data set and
judge: the judge–human correlation, each interval's coverage at 90% and 95% with its
Monte-Carlo standard error, the median width of each corrected interval against the
human-only one a user would otherwise get (labels alone, Wilson, on a simple random sample
of the same budget: where the goal's width is judged) and, for IPW, against the
Horvitz–Thompson (labels-alone) estimate of its own design, and the judge-only interval's
coverage for contrast.
Goal: coverage within 2 points of nominal; corrected narrower than human-only when the
judge correlates with the humans. A cell counts as outside the goal only when it is more
than 2 points off by more than 2 Monte-Carlo standard errors (sqrt(c(1-c)/k) over the k
draws that gave an interval; 0.55 points at 90% with 3,000): a method that refuses (the
reason in ``details.undefined``) gives no interval, counted in k, never as a miss.

    python bench/bench_corrected_coverage.py [--draws 3000] [--share 0.1]
        [--population super|finite] [--data bundled frank]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evalkit.estimation import (  # noqa: E402
    human_mean,
    ipw_mean,
    judge_mean,
    ppi_mean,
    rogan_gladen,
)
from evalkit.labels.sampling import draw_indices  # noqa: E402

DATA = ROOT / "evalkit" / "data"
FRANK = ROOT / "bench" / "data" / "frank_factuality.jsonl"
# the judge_agreement experiment's offline judges (token overlap with the context and the
# message) at its thresholds; HaluEval has no context, so there they see the message only
JUDGES = {"words": 0.25, "phrases": 0.5}
CONFIDENCES = (0.9, 0.95)
METHODS = ("ppi++", "ipw_strat", "ipw_active", "rogan_gladen", "human", "judge")
CORRECTED = ("ppi++", "ipw_strat", "ipw_active", "rogan_gladen")
# the goal's width: each corrected interval against the labels alone on a simple random
# sample of the same budget (Wilson), the human-only interval a user would otherwise get
HUMAN_RATIOS = ("ppi++/human", "ipw_strat/human", "ipw_active/human", "rogan_gladen/human")


class Labelled:
    """One data set and judge: human values ``y``, the judge's values ``f`` (what is
    estimated with), its score ``s`` in [0, 1] (what `active` draws by) and its verdict
    (the strata of `stratified`)."""

    def __init__(self, y: np.ndarray, f: np.ndarray, s: np.ndarray, verdict: np.ndarray):
        self.y, self.f, self.s, self.verdict = y, f, s, verdict
        self.binary = bool(np.all((y == 0) | (y == 1)))


def bundled(workdir: Path) -> dict[str, Labelled]:
    """HaluEval and BEGIN, judged by the judge_agreement experiment's offline judges."""
    import os

    import evalkit

    out = {}
    cwd = os.getcwd()
    try:
        os.chdir(workdir)
        for data in ("halueval_general.jsonl", "begin_wow.jsonl"):
            run = evalkit.run("judge_agreement", [f"source.path={DATA / data}", "metrics=[]",
                                                  f"runner.runs_dir={workdir / 'runs'}"])
            rows = run.query("SELECT r.record_id, r.human_label, j.judge, j.value FROM records r "
                             "JOIN judgments j USING (record_id) WHERE j.status = 'ok' "
                             "AND r.excluded_by IS NULL ORDER BY r.record_id").to_pylist()
            for judge, cut in JUDGES.items():
                mine = [r for r in rows if r["judge"] == judge]
                y = np.array([float(r["human_label"]) for r in mine])
                s = np.clip(np.array([float(r["value"]) for r in mine]), 0, 1)
                verdict = (s > cut).astype(float)
                out[f"{data.split('.')[0]}/{judge}"] = Labelled(y, verdict, s, verdict)
    finally:
        os.chdir(cwd)
    return out


def frank() -> dict[str, Labelled]:
    """FRANK: a summary has a factual error (human: some sentence not error-free) by FactCC
    and by QAGS below 0.5; and the mean share of erroneous sentences by 1 - QAGS. FactCC's
    value is the share of sentences it finds in error: PPI++ and IPW predict with it,
    Rogan–Gladen (which needs a 0/1 verdict) and the strata use its verdict, any error."""
    rows = [json.loads(line) for line in FRANK.read_text().splitlines()]
    err = np.array([1.0 - r["Factuality"] for r in rows])
    y = (err > 0).astype(float)
    factcc = 1.0 - np.array([float(r["FactCC"]) for r in rows])
    qags = 1.0 - np.array([float(r["QAGS"]) for r in rows])
    qv = (qags > 0.5).astype(float)
    return {"frank/factcc": Labelled(y, factcc, factcc, (factcc > 0).astype(float)),
            "frank/qags": Labelled(y, qv, qags, qv),
            "frank/qags-mean": Labelled(err, qags, qags, qv)}


def coverage(data: Labelled, draws: int, share: float, population: str,
             seed: int) -> dict[str, object]:
    k = len(data.y)
    truth = float(data.y.mean())
    rng = np.random.default_rng(seed)
    covered = {(m, c): 0 for m in METHODS for c in CONFIDENCES}
    defined = dict.fromkeys(covered, 0)
    widths: dict[str, list[float]] = {m: [] for m in ("ppi++", "human", "ipw_strat",
                                                       "ht_strat", "ipw_active", "ht_active",
                                                       "rogan_gladen")}
    for _ in range(draws):
        run = rng.integers(0, k, k) if population == "super" else np.arange(k)
        y_r, f_r, s_r = data.y[run], data.f[run], data.s[run]
        keys = np.where(data.verdict[run] > 0, "flagged", "not flagged").astype(object)
        big_n = len(run)
        n = round(share * big_n)
        finite = population == "finite"
        idx, _, _ = draw_indices("random", s_r, n, rng)
        mask = np.zeros(big_n, dtype=bool)
        mask[idx] = True
        s_idx, s_pi, s_strata = draw_indices("stratified", s_r, n, rng, keys)
        a_idx, a_pi, _ = draw_indices("active", s_r, n, rng)
        for c in CONFIDENCES:
            ests = {"ppi++": ppi_mean(y_r[idx], f_r[idx], f_r[~mask], c),
                    "human": human_mean(y_r[idx], c, n_boot=200),
                    "ipw_strat": ipw_mean(f_r, s_idx, y_r[s_idx], s_pi, s_strata, c,
                                          finite=finite),
                    "ht_strat": ipw_mean(f_r, s_idx, y_r[s_idx], s_pi, s_strata, c,
                                         use_judge=False, finite=finite),
                    "ipw_active": ipw_mean(f_r, a_idx, y_r[a_idx], a_pi, None, c,
                                           finite=finite),
                    "ht_active": ipw_mean(f_r, a_idx, y_r[a_idx], a_pi, None, c,
                                          use_judge=False, finite=finite),
                    "judge": judge_mean(f_r, c, n_boot=200)}
            if data.binary:  # on the judge's 0/1 verdict, as the metric does
                v_r = data.verdict[run]
                ests["rogan_gladen"] = rogan_gladen(v_r, y_r[idx], v_r[idx], c, finite=finite)
            for m, e in ests.items():
                if m not in METHODS or e.value is None or e.low is None:
                    continue
                defined[(m, c)] += 1
                covered[(m, c)] += e.low <= truth <= e.high
            if c == 0.95:
                for m in widths:
                    e = ests.get(m)
                    if e is None:  # not computed (Rogan–Gladen on a mean)
                        continue
                    widths[m].append(np.nan if e.low is None else e.high - e.low)
    corr = float(np.corrcoef(data.y, data.f)[0, 1]) if np.std(data.f) > 0 else 0.0

    def ratio(a: str, b: str) -> float | None:
        if len(widths[a]) != len(widths[b]):  # not computed here (Rogan–Gladen on a mean)
            return None
        with np.errstate(invalid="ignore", divide="ignore"):  # refused: no width
            r = np.array(widths[a]) / np.array(widths[b])
        r = r[np.isfinite(r)]
        return float(np.median(r)) if len(r) else None

    return {"truth": truth, "judge_rate": float(data.f.mean()), "correlation": corr,
            "n": round(share * k), "N": k,
            "coverage": {f"{m}@{c:g}": (covered[(m, c)] / defined[(m, c)]
                                        if defined[(m, c)] else None, defined[(m, c)])
                         for m, c in covered},
            # against the human-only interval a user would otherwise get (labels alone,
            # Wilson, on a simple random sample of the same budget), and for IPW also against
            # the Horvitz–Thompson estimate of its own design (labels alone, same draw)
            "width_ratio": {"ppi++/human": ratio("ppi++", "human"),
                            "ipw_strat/human": ratio("ipw_strat", "human"),
                            "ipw_active/human": ratio("ipw_active", "human"),
                            "rogan_gladen/human": ratio("rogan_gladen", "human"),
                            "ipw_strat/ht": ratio("ipw_strat", "ht_strat"),
                            "ipw_active/ht": ratio("ipw_active", "ht_active")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.1])
    parser.add_argument("--population", choices=("finite", "super"), default="finite",
                        help="finite (the issue's design, where the goal is judged): label "
                        "the data's own records; super: resample a run from them first")
    parser.add_argument("--data", nargs="+", choices=("bundled", "frank"),
                        default=["bundled", "frank"])
    parser.add_argument("--json", action="store_true", help="also print every figure as JSON")
    args = parser.parse_args()
    labelled: dict[str, Labelled] = {}
    if "bundled" in args.data:
        with tempfile.TemporaryDirectory() as tmp:
            labelled.update(bundled(Path(tmp)))
    if "frank" in args.data:
        labelled.update(frank())
    for share in args.share:
        report(labelled, args.draws, share, args.population, args.json)


def report(labelled: dict[str, Labelled], draws: int, share: float, population: str,
           as_json: bool) -> None:
    results = {name: coverage(d, draws, share, population, seed=31)
               for name, d in labelled.items()}
    misses = []
    se = {c: 100 * np.sqrt(c * (1 - c) / draws) for c in CONFIDENCES}
    framing = ("the issue's design: the goal is judged here" if population == "finite"
               else "for information: the goal is judged with --population finite")
    print(f"{draws} label samples of {share:.0%} of the records each, population {population} "
          f"({framing}); coverage of the all-labels truth; Monte-Carlo standard error "
          + ", ".join(f"{se[c]:.2f} points at {c:.0%}" for c in CONFIDENCES)
          + "; (k) = draws where the method gave an interval (the others refused)")
    head = (f"{'data/judge':<22} {'rho':>5} {'truth':>6} {'judge':>6} {'n':>4} | "
            + " ".join(f"{m + '@' + format(c, 'g'):>15}" for m in METHODS for c in CONFIDENCES)
            + " | width / labels alone (Wilson, random): " + " ".join(HUMAN_RATIOS)
            + " | same design / HT: strat active")
    print(head)
    for name, r in results.items():
        cells = []
        for m in METHODS:
            for c in CONFIDENCES:
                cov, count = r["coverage"][f"{m}@{c:g}"]
                cells.append(f"{'-' if cov is None else f'{cov:.3f}'}"
                             f"{'' if count == draws else f' ({count})'}".rjust(15))
                # outside the goal only when more than 2 points off by over 2 MC SEs
                mc = float(np.sqrt(c * (1 - c) / count)) if count else 0.0
                if (m in CORRECTED + ("human",) and cov is not None
                        and abs(cov - c) - 0.02 > 2 * mc):
                    misses.append(f"{name} {m}@{c:g} {cov:.3f} (MC SE {100 * mc:.2f})")
        w = r["width_ratio"]
        print(f"{name:<22} {r['correlation']:>5.2f} {r['truth']:>6.3f} {r['judge_rate']:>6.3f} "
              f"{r['n']:>4} | {' '.join(cells)} | "
              + " ".join("-" if w[k] is None else f"{w[k]:.3f}"
                         for k in HUMAN_RATIOS + ("ipw_strat/ht", "ipw_active/ht")))
        if r["correlation"] > 0.1:
            for k in HUMAN_RATIOS:
                if w[k] is not None and w[k] >= 1:
                    misses.append(f"{name}: {k} width {w[k]:.3f}, not narrower")
    print(f"goal {'met' if not misses else 'NOT met: ' + '; '.join(misses)} (every corrected "
          "method and the labels alone within 2 points of nominal, up to 2 MC standard errors; "
          "every corrected interval narrower than labels alone on a random sample (Wilson) "
          "where rho > 0.1)\n")
    if as_json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
