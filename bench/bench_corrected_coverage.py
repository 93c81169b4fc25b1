"""Are the corrected intervals valid? From fully human-labelled data (the bundled HaluEval and
BEGIN samples, 300 records each), draw 1,000 label samples of 10% of the records, estimate
the human rate from them and the judge's verdict on every record, and count how often the
interval covers the all-labels truth.

Printed per data set and judge: the judge–human correlation, the coverage of the 90% and 95%
intervals of each estimator (PPI++ and Rogan–Gladen from a simple random sample, the IPW
form from a sample stratified by the judge's verdict, the labels alone), the median width of
the corrected interval against the human-only one, and the judge-only interval's coverage
for contrast (it covers the judge's rate, not the truth). Goal: coverage within 2 points of
nominal; corrected narrower than human-only when the judge correlates with the humans.

    python bench/bench_corrected_coverage.py [--draws 1000] [--share 0.1]"""

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

DATA = ROOT / "evalkit" / "data"
# the judge_agreement experiment's offline judges (token overlap with the context and the
# message) at its thresholds; HaluEval has no context, so there they see the message only
JUDGES = {"words": 0.25, "phrases": 0.5}
CONFIDENCES = (0.9, 0.95)


def judged(data: str, workdir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per judge: (human labels, judge verdicts) over the data set's records."""
    import os

    import evalkit

    os.chdir(workdir)
    run = evalkit.run("judge_agreement", [f"source.path={DATA / data}", "metrics=[]",
                                          f"runner.runs_dir={workdir / 'runs'}"])
    rows = run.query("SELECT r.record_id, r.human_label, j.judge, j.value FROM records r "
                     "JOIN judgments j USING (record_id) WHERE j.status = 'ok' "
                     "AND r.excluded_by IS NULL ORDER BY r.record_id").to_pylist()
    out = {}
    for judge, cut in JUDGES.items():
        mine = [(float(r["human_label"]), float(r["value"] > cut)) for r in rows
                if r["judge"] == judge]
        out[judge] = (np.array([m[0] for m in mine]), np.array([m[1] for m in mine]))
    return out


def coverage(y_all: np.ndarray, f_all: np.ndarray, draws: int, share: float,
             seed: int) -> dict[str, object]:
    big_n = len(y_all)
    n = round(share * big_n)
    truth = float(y_all.mean())
    rng = np.random.default_rng(seed)
    strata_all = f_all.astype(int)
    covered = {(m, c): 0 for m in ("ppi++", "rogan_gladen", "ipw", "human", "judge")
               for c in CONFIDENCES}
    defined = dict.fromkeys(covered, 0)
    widths: dict[str, list[float]] = {"ppi++": [], "human": []}
    for _ in range(draws):
        idx = np.sort(rng.choice(big_n, n, replace=False))
        mask = np.zeros(big_n, dtype=bool)
        mask[idx] = True
        y, f, f_u = y_all[idx], f_all[idx], f_all[~mask]
        # stratified by the judge's verdict, half the budget in each stratum (unequal
        # probabilities whenever the strata differ in size)
        sizes = {s: int(np.count_nonzero(strata_all == s)) for s in (0, 1)}
        take = {0: n - n // 2, 1: n // 2}
        s_idx = np.concatenate([rng.choice(np.flatnonzero(strata_all == s),
                                           min(take[s], sizes[s]), replace=False)
                                for s in (0, 1)])
        pi = np.array([min(take[s], sizes[s]) / sizes[s] for s in strata_all[s_idx]])
        for c in CONFIDENCES:
            ests = {"ppi++": ppi_mean(y, f, f_u, c),
                    "rogan_gladen": rogan_gladen(f_all, y, f, c, min_per_class=1),
                    "ipw": ipw_mean(f_all, s_idx, y_all[s_idx], pi, strata_all[s_idx], c),
                    "human": human_mean(y, c), "judge": judge_mean(f_all, c)}
            for m, e in ests.items():
                if e.value is None:
                    continue
                defined[(m, c)] += 1
                covered[(m, c)] += e.low <= truth <= e.high
            if c == 0.95 and ests["ppi++"].value is not None and \
                    ests["human"].value is not None:
                widths["ppi++"].append(ests["ppi++"].high - ests["ppi++"].low)
                widths["human"].append(ests["human"].high - ests["human"].low)
    corr = float(np.corrcoef(y_all, f_all)[0, 1]) if np.std(f_all) > 0 else 0.0
    return {"truth": truth, "judge_rate": float(f_all.mean()), "correlation": corr, "n": n,
            "N": big_n,
            "coverage": {f"{m}@{c:g}": (covered[(m, c)] / defined[(m, c)]
                                        if defined[(m, c)] else None, defined[(m, c)])
                         for m, c in covered},
            "width_ppi_over_human": float(np.median(np.array(widths["ppi++"])
                                                    / np.array(widths["human"]))),
            "width_ppi": float(np.median(widths["ppi++"])),
            "width_human": float(np.median(widths["human"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--share", type=float, nargs="+", default=[0.1])
    parser.add_argument("--json", action="store_true", help="also print every figure as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        labelled = {f"{data.split('.')[0]}/{judge}": yf
                    for data in ("halueval_general.jsonl", "begin_wow.jsonl")
                    for judge, yf in judged(data, Path(tmp)).items()}
    for share in args.share:
        report(labelled, args.draws, share, args.json)


def report(labelled: dict[str, tuple[np.ndarray, np.ndarray]], draws: int, share: float,
           as_json: bool) -> None:
    results = {name: coverage(y, f, draws, share, seed=31)
               for name, (y, f) in labelled.items()}
    misses = []
    print(f"{draws} random label samples of {share:.0%} of the records each; "
          "coverage of the all-labels truth (goal: within 2 points of nominal)")
    head = (f"{'data/judge':<24} {'rho':>5} {'truth':>6} {'judge':>6} | "
            + " ".join(f"{m + '@' + format(c, 'g'):>15}" for m in
                       ("ppi++", "ipw", "rogan_gladen", "human", "judge") for c in CONFIDENCES)
            + " | width ppi/human")
    print(head)
    for name, r in results.items():
        cells = []
        for m in ("ppi++", "ipw", "rogan_gladen", "human", "judge"):
            for c in CONFIDENCES:
                cov, count = r["coverage"][f"{m}@{c:g}"]
                cells.append(f"{'-' if cov is None else f'{cov:.3f}'}"
                             f"{'' if count == draws else f' ({count})'}".rjust(15))
                if m in ("ppi++", "ipw") and cov is not None and abs(cov - c) > 0.02:
                    misses.append(f"{name} {m}@{c:g} {cov:.3f}")
        print(f"{name:<24} {r['correlation']:>5.2f} {r['truth']:>6.3f} {r['judge_rate']:>6.3f} "
              f"| {' '.join(cells)} | {r['width_ppi_over_human']:.3f}")
        if r["correlation"] > 0.1 and r["width_ppi_over_human"] >= 1:
            misses.append(f"{name}: PPI++ not narrower than human-only")
    print(f"goal {'met' if not misses else 'NOT met: ' + '; '.join(misses)} (PPI++ and IPW "
          "within 2 points of nominal; PPI++ narrower than human-only where rho > 0.1)\n")
    if as_json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
