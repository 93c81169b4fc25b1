"""``evalkit compare RUN_A RUN_B``: how every metric moved between two runs, over the records
both runs share, and whether it moved by more than chance; with ``--gate``, an exit code a
CI job can use. The maths is in :mod:`evalkit.comparison`; this is its command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalkit.commands._output import add_format_arguments, chosen_format, emit
from evalkit.errors import EvalkitError
from evalkit.numbers import number
from evalkit.safetext import visible

__all__ = ["add_arguments", "compare", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from evalkit.comparison import CORRECTIONS, MAX_BOOT, N_BOOT

    parser.add_argument("run_a", help="the baseline: a run id or a run directory; RUN:recorded "
                        "or RUN:candidate for a side of a shadow run (generate:)")
    parser.add_argument("run_b", help="the candidate: a run id or a run directory, or a side "
                        "(RUN:candidate)")
    parser.add_argument("--runs-dir", default="runs", help="where run ids are looked up "
                        "(default: runs)")
    parser.add_argument("--gate", action="append", default=None, metavar="METRIC:±TOL",
                        help="fail (exit 5) when METRIC got worse by more than TOL with "
                        "evidence: 'echo_rate:+0.02' (rising is worse), 'accuracy:-0.01' "
                        "(falling is worse), 'echo_rate@model=a:0' (a slice; no sign: the "
                        "metric's own direction). Repeatable. Default: the gates in run B's "
                        "config (gates:)")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm",
                        help="multiplicity correction across rows (and across gates): holm "
                        "(family-wise error, the default), bh (false discovery rate), none")
    parser.add_argument("--flips", action="store_true",
                        help="list the records whose verdict flipped (regressed, improved) "
                        "instead of the metric rows")
    parser.add_argument("--n-boot", type=int, default=N_BOOT,
                        help=f"paired bootstrap resamples drawn first (default: {N_BOOT}; "
                        "each recomputes every metric on both runs)")
    parser.add_argument("--max-boot", type=int, default=MAX_BOOT,
                        help="resamples a row may get when its verdict is within Monte-Carlo "
                        f"error of the bar (default: {MAX_BOOT})")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="CI level (default: 0.95)")
    parser.add_argument("--metric", action="append", default=None,
                        help="only this metric instance (repeatable)")
    add_format_arguments(parser)


def compare(run_a: Path, run_b: Path, n_boot: int = 200, seed: int = 0,
            confidence: float = 0.95, only: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of :func:`evalkit.comparison.compare_runs` with ``n_boot`` resamples and no
    more (one row per (metric, slice) both runs produce)."""
    from evalkit.comparison import compare_runs

    return compare_runs(run_a, run_b, n_boot=n_boot, max_boot=n_boot, seed=seed,
                        confidence=confidence, only=only).rows


def _gates(args: argparse.Namespace, run_b: Path) -> list[Any]:

    from evalkit.comparison import GateConfig, parse_gate

    if args.gate:
        try:
            return [parse_gate(g) for g in args.gate]
        except ValueError as exc:
            raise EvalkitError(f"compare: {exc}") from None
    from evalkit.results.runfiles import load_manifest

    config = load_manifest(run_b).get("config") or {}
    out = []
    for i, spec in enumerate(config.get("gates") or []):
        try:
            gate = GateConfig(**spec)
            gate.validate()
        except (TypeError, ValueError) as exc:
            raise EvalkitError(f"compare: gates[{i}] in {run_b / 'manifest.json'}: "
                               f"{exc}") from None
        out.append(gate)
    return out


def main(args: argparse.Namespace) -> int:
    import tempfile

    from evalkit.commands._remote import runs_at
    from evalkit.comparison import compare_runs
    from evalkit.comparison.sides import side_view, split_side

    if args.n_boot < 0 or args.max_boot < 0:
        raise EvalkitError("compare: --n-boot and --max-boot must be 0 or more")
    if not 0.0 < args.confidence < 1.0:
        raise EvalkitError("compare: --confidence must be within (0, 1)")
    (ref_a, side_a), (ref_b, side_b) = split_side(args.run_a), split_side(args.run_b)
    # (runs on object storage are copied to a private directory first: commands/_remote.py)
    with runs_at(args.runs_dir, "compare") as runs, \
            tempfile.TemporaryDirectory(prefix="evalkit-sides-") as scratch:
        run_a = runs.find(ref_a, unfinished=True)
        run_b = runs.find(ref_b, unfinished=True)
        runs.labels()
        from evalkit.results.runfiles import RunFileError, check_run_tables, load_manifest

        for run in (run_a, run_b):  # a run's odd file is one line naming it
            try:
                load_manifest(run)
                check_run_tables(run)
            except RunFileError as exc:
                raise EvalkitError(f"compare: {exc}") from None
        # RUN:recorded, RUN:candidate: a side of a shadow run, compared as a run of its own
        if side_a is not None:
            run_a = side_view(run_a, side_a, Path(scratch) / "a")
        if side_b is not None:
            run_b = side_view(run_b, side_b, Path(scratch) / "b")
        result = compare_runs(run_a, run_b, n_boot=args.n_boot,
                              max_boot=max(args.n_boot, args.max_boot), seed=args.seed,
                              confidence=args.confidence, only=args.metric,
                              correction=args.correction, gates=_gates(args, run_b),
                              runs_dir=runs.path)
    fmt = chosen_format(args.format, args.out)
    human = fmt in ("table", "vertical")
    if args.flips:
        columns = ["metric", "slice", "record_id", "a", "b", "change", "same_output"]
        emit(columns, [tuple(f[c] for c in columns) for f in result.flips], fmt, args.out,
             note=f"{len(result.flips)} records flipped (A = {run_a.name}, B = {run_b.name})"
             if human else None, csv_formulas=args.csv_formulas)
    elif human:
        print_comparison(result, fmt, args.out)
    else:
        columns = list(result.rows[0]) if result.rows else ["metric"]
        emit(columns, [tuple(r.values()) for r in result.rows], fmt, args.out,
             csv_formulas=args.csv_formulas)
    for gate in result.gates:
        print(visible(f"gate {gate['gate']}: {gate['verdict']}"))
    return result.exit_code


def _ci(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{number(lo)}, {number(hi)}]"


def print_comparison(result: Any, fmt: str = "table", out: str | None = None) -> None:
    """The rows of a :class:`~evalkit.comparison.Comparison` for people."""
    table = [(r["metric"], r["slice"], r["a"], r["b"], r["delta"],
              _ci(r["ci_low"], r["ci_high"]) or r["note"] or "", r["verdict"])
             for r in result.rows]
    split = [r for r in result.rows if r["judge_delta"] is not None and r["n_same_output"]]
    note = (f"A = {result.run_a.name}, B = {result.run_b.name}, {result.n_shared} shared "
            f"records. {result.summary()}. Intervals are per row; verdicts are corrected.")
    emit(["metric", "slice", "A", "B", "B − A", f"{result.confidence:.0%} CI", "verdict"],
         table, fmt, out, note=note)
    lines = [f"judge {c['judge']} changed: {c['field']} {c['a']} → {c['b']}"
             for c in result.judge_changes]
    if split:
        lines.append("judge/system split (records with byte-identical outputs: the judge's):")
    for r in split:
        lines.append(f"  {r['metric']} [{r['slice']}]: judge {number(r['judge_delta'])} "
                     f"{_ci(r['judge_ci_low'], r['judge_ci_high'])}, system "
                     f"{number(r['system_delta'])} "
                     f"{_ci(r['system_ci_low'], r['system_ci_high'])} "
                     f"({r['n_same_output']} of {r['n_pairs']} outputs unchanged)")
    if result.corrected:
        lines.append("corrected by human labels (PPI++ on the paired differences):")
    for c in result.corrected:
        value = ("no value: " + str(c["undefined"]) if c["value"] is None else
                 f"{number(c['value'])} {_ci(c['ci_low'], c['ci_high'])} "
                 f"({c['n_labelled']} records labelled in both of {c['n_shared']})")
        line = (f"  {c['metric']}: B − A corrected {value} · judge alone "
                f"{number(c['judge_delta'])} {_ci(c['judge_ci_low'], c['judge_ci_high'])}")
        if c.get("human_delta") is not None:
            line += (f" · labels alone {number(c['human_delta'])} "
                     f"{_ci(c['human_ci_low'], c['human_ci_high'])}")
        lines.append(line)
    for line in lines if out is None else []:
        print(visible(line))
