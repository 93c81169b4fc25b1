"""``evalkit review SAMPLE_ID``: the offline HTML page to label a drawn sample by hand
(:mod:`evalkit.labels.review`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.commands._runs import find_run, local_runs_dir

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sample", help="a sample id from evalkit label sample")
    parser.add_argument("--runs-dir", default="runs", help="the runs directory (default: runs)")
    parser.add_argument("--out", default=None, help="the page to write (default: "
                        "RUNS_DIR/_labels/review-SAMPLE_ID.html)")


def main(args: argparse.Namespace) -> int:
    from evalkit.labels.review import write_review
    from evalkit.labels.store import labels_dir, read_sample

    runs_dir = local_runs_dir(args.runs_dir, "review")
    sample = read_sample(runs_dir, args.sample).to_pylist()
    if not sample:
        from evalkit.errors import LabelError

        raise LabelError(f"review: sample {args.sample!r} drew no record; draw another")
    run_dir = find_run(sample[0]["run_id"], runs_dir, "review")
    out = Path(args.out) if args.out else labels_dir(runs_dir) / f"review-{args.sample}.html"
    write_review(run_dir, sample, runs_dir, out)
    print(f"wrote {out} ({len(sample)} records); open it in a browser, label, press Export, "
          "then: evalkit label import labels-" + args.sample + ".jsonl")
    return 0
