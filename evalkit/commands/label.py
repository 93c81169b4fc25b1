"""``evalkit label import FILE`` and ``evalkit label sample RUN``: human labels into the runs
directory's labels table, and the records to label drawn by design (docs/labels.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.commands._runs import find_run, local_runs_dir
from evalkit.errors import EvalkitError

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    imp = sub.add_parser("import", help="check a labels file (JSONL, CSV, Parquet) and "
                         "append it to the labels table")
    imp.add_argument("file", nargs="?", help="rows with record_id, judge, value or label, "
                     "labeler (and sample_id, or design and inclusion_prob)")
    imp.add_argument("--from-run", metavar="RUN", help="instead: declare labels a run's "
                     "records already carry (with --column)")
    imp.add_argument("--column", help="with --from-run: the record column (human_label, or "
                     "metadata.<key>) holding the labels")
    imp.add_argument("--score", help="with --from-run: instead, an imported score (a Langfuse "
                     "annotation) holding them")
    imp.add_argument("--judge", help="with --from-run: the judge whose question they answer")
    imp.add_argument("--labeler", help="who labelled (for rows that do not say; required "
                     "with --from-run)")
    imp.add_argument("--runs-dir", default="runs", help="the runs directory (default: runs)")
    smp = sub.add_parser("sample", help="draw the records of a run to label, with each one's "
                         "inclusion probability")
    smp.add_argument("run", help="a run id, a run directory, or latest")
    smp.add_argument("--judge", required=True, help="the judge whose verdicts get labelled")
    smp.add_argument("--budget", type=int, required=True, help="records to label")
    smp.add_argument("--design", default="random", choices=["random", "stratified", "active"])
    smp.add_argument("--seed", type=int, default=0)
    smp.add_argument("--by", default=None, help="stratified: the record column to stratify "
                     "by (default: the judge's verdict)")
    smp.add_argument("--threshold", type=float, default=None,
                     help="the judge's verdict: flagged when value > threshold (default 0.5)")
    smp.add_argument("--runs-dir", default="runs", help="the runs directory (default: runs)")


def main(args: argparse.Namespace) -> int:
    runs_dir = local_runs_dir(args.runs_dir, "label")
    if args.action == "import":
        return _import(args, runs_dir)
    return _sample(args, runs_dir)


def _import(args: argparse.Namespace, runs_dir: Path) -> int:
    from evalkit.labels.declared import column_rows, score_rows
    from evalkit.labels.importing import import_labels, import_rows

    if args.from_run:
        if args.file or not ((args.column is None) != (args.score is None) and args.judge
                             and args.labeler):
            raise EvalkitError("label import --from-run RUN: give --column or --score, "
                               "--judge and --labeler, and no FILE")
        run_dir = find_run(args.from_run, runs_dir, "label import")
        if args.column:
            rows = column_rows(run_dir, args.column, args.judge, args.labeler)
            result = import_rows(rows, runs_dir, f"column:{args.column}")
        else:
            rows = score_rows(run_dir, args.score, args.judge, args.labeler)
            result = import_rows(rows, runs_dir, f"score:{args.score}")
    elif args.file:
        result = import_labels(Path(args.file), runs_dir, labeler=args.labeler)
    else:
        raise EvalkitError("label import: name a labels file, or --from-run RUN --column COL")
    where = f" ({result.part})" if result.part else ""
    print(f"imported {result.appended} label(s){where}; {result.already_present} already "
          "present")
    return 0


def _sample(args: argparse.Namespace, runs_dir: Path) -> int:
    from evalkit.estimation import expected_half_widths
    from evalkit.labels.sampling import draw_sample

    run_dir = find_run(args.run, runs_dir, "label sample")
    drawn = draw_sample(run_dir, runs_dir, args.judge, args.budget, args.design, args.seed,
                        args.by, args.threshold)
    n = drawn.table.num_rows
    sample_id = drawn.table.column("sample_id")[0].as_py() if n else "(empty)"
    print(f"drew {n} of {drawn.population} records ({args.design}, seed {args.seed}): "
          f"sample {sample_id} in {drawn.path}")
    planned = args.budget
    if drawn.effective_n is not None:
        # unequal weights cost part of the budget: plan on what is left
        planned = max(2, int(drawn.effective_n))
        print(f"active (tau {drawn.tau:.2f}: that share of the budget spread evenly, the "
              "rest where the judge is least certain): effective sample size "
              f"{drawn.effective_n:.1f} of {args.budget} (Kish's N²/Σ1/π), which the "
              "half-widths below assume")
    widths = expected_half_widths(planned, drawn.population, drawn.judge_rate)
    print(f"expected 95% half-width of the corrected rate near {drawn.judge_rate:.3g}: "
          + ", ".join(f"±{w:.3f} at judge–human correlation {rho:g}"
                      for rho, w in widths.items()) + " (0: labels alone)")
    print(f"label them: evalkit review {sample_id}   (then: evalkit label import FILE)")
    return 0
