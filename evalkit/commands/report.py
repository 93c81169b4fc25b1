"""``evalkit report RUN [RUN ...]``: one self-contained HTML page (styles, scripts, data and
charts inline; it opens from disk with no network), a Markdown summary for CI comments and a
JUnit XML file (alerts and gates as test cases), written into the run directory (the last
run's for several runs, which are compared against the first). ``--index RUNS_DIR`` writes a
page listing every run."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.commands._remote import runs_at
from evalkit.errors import EvalkitError

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="*", help="run ids, run directories or a sweep id (several "
                        "runs: one page, each compared against the first)")
    parser.add_argument("--index", metavar="RUNS_DIR", default=None,
                        help="write RUNS_DIR/index.html listing every run instead")
    parser.add_argument("--runs-dir", default="runs", help="where run ids are looked up "
                        "(default: runs)")
    parser.add_argument("--out", default=None, help="directory to write the report into "
                        "(default: the last run's directory)")
    parser.add_argument("--max-records", type=int, default=100_000,
                        help="records in the drill-down (default: 100000; the rest is stated)")
    parser.add_argument("--text-chars", type=int, default=1_000,
                        help="characters kept of each text in the drill-down (default: 1000)")
    parser.add_argument("--n-boot", type=int, default=200,
                        help="paired bootstrap resamples of compare's verdicts between runs "
                        "(default: 200; 0: no verdicts)")


def main(args: argparse.Namespace) -> int:
    from evalkit.report import Limits, write_index, write_report

    if args.index is not None:
        if args.runs:
            raise EvalkitError("report: give either runs or --index RUNS_DIR, not both")
        print(f"wrote {write_index(Path(args.index))}")
        return 0
    if not args.runs:
        raise EvalkitError("report: name a run (an id or a directory), or --index RUNS_DIR")
    if args.max_records < 0 or args.text_chars < 1 or args.n_boot < 0:
        raise EvalkitError("report: --max-records, --n-boot must be 0 or more and "
                           "--text-chars at least 1")
    # runs on object storage are copied to a private directory first, and the page is
    # uploaded beside the last run (commands/_remote.py)
    with runs_at(args.runs_dir, "report") as runs:
        dirs: list[Path] = []
        out = Path(args.out) if args.out else None
        for ref in args.runs:
            try:
                dirs.append(runs.find(ref))
            except EvalkitError:
                if Path(ref).is_dir():  # a run directory that cannot be read: that's the error
                    raise
                jobs = runs.sweep(ref)  # the id `evalkit run -m` printed
                if not jobs:
                    raise
                dirs += jobs
                if out is None and len(args.runs) == 1:  # where the sweep's own page goes
                    # (here, for a sweep on object storage: it has no directory of its own)
                    out = Path(f"sweep-{jobs[0].name}") if runs.remote is not None else \
                        jobs[0].parent / f"sweep-{jobs[0].name}"
        runs.labels()
        files = write_report(dirs, out,
                             Limits(args.max_records, args.text_chars), args.n_boot)
        written = [files.html, files.markdown, files.junit]
        where = runs.publish_beside(dirs[-1], written) if out is None else \
            [str(f) for f in written]
    print(f"wrote {where[0]} ({files.html.stat().st_size / 1e6:.1f} MB, "
          f"{files.seconds:.2f} s), {Path(where[1]).name}, {Path(where[2]).name}"
          if runs.remote is None or out is not None else
          f"wrote {where[0]} ({files.seconds:.2f} s), {where[1]}, {where[2]}")
    return 0
