"""``evalkit push RUN --to langfuse``: send a finished run's judgments to another system."""

from __future__ import annotations

import argparse
import json

from evalkit.commands._remote import runs_at
from evalkit.errors import EvalkitError
from evalkit.redact import mask_tree

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run id (searched under --runs-dir) or a run directory")
    parser.add_argument("--all-runs", action="store_true",
                        help="push a run that did not finish (running, failed, interrupted)")
    parser.add_argument("--to", required=True, metavar="SINK",
                        help="the sink plugin to push to (e.g. langfuse; see `evalkit plugins`)")
    parser.add_argument("--runs-dir", default="runs", help="the runs directory (default: runs)")
    parser.add_argument("--host", default=None, help="override the sink's host")
    parser.add_argument("--endpoint", default=None,
                        help="the otlp sink's OTLP/HTTP logs URL (default: the standard "
                        "OTEL_EXPORTER_OTLP_* environment variables)")
    parser.add_argument("--judges", default=None,
                        help="comma-separated judge names to push (default: all)")
    parser.add_argument("--include-skipped", action="store_true",
                        help="also push judgments skipped because a filter set the record aside")
    parser.add_argument("--include-errors", action="store_true",
                        help="also push judge errors")
    parser.add_argument("--id-scope", choices=("run", "experiment"), default=None,
                        help="score ids per run (default) or per experiment (latest run "
                        "overwrites)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace) -> int:
    from evalkit.config import validate_dataclass
    from evalkit.errors import PluginError
    from evalkit.registry import registry

    try:
        cls = registry().get("sinks", args.to)
    except PluginError as exc:
        raise EvalkitError(f"push --to: {exc}") from None
    options = {"host": args.host, "endpoint": args.endpoint,
               "include_skipped": args.include_skipped or None,
               "include_errors": args.include_errors or None, "id_scope": args.id_scope,
               "judges": args.judges.split(",") if args.judges else None}
    config = validate_dataclass(cls.Config, {k: v for k, v in options.items() if v is not None},
                                f"push --to {args.to}", f"sink plugin '{args.to}'")
    # (a run on object storage is copied to a private directory first: commands/_remote.py)
    with runs_at(args.runs_dir, "push") as runs:
        run_dir = runs.find(args.run, unfinished=args.all_runs)
        # a server's answer may quote a key: what is printed is masked
        report = mask_tree(cls(args.to, config, None).push(run_dir), by_name=False)
        where = runs.shown(run_dir)  # (a remote run's URL, not its private copy's path)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        _print(report, where)
    return 1 if report.get("failed") else 0


def _print(report: dict, run_dir: str) -> None:
    print(f"pushed {report.get('pushed', 0)} score(s) from {run_dir} to "
          f"{report.get('host', '?')}")
    for why, n in sorted((report.get("skipped") or {}).items()):
        print(f"  not pushed: {n} {why}")
    failed = report.get("failed") or 0
    if failed:
        print(f"  failed: {failed}")
        for f in report.get("failures", [])[:10]:
            print(f"    {f['judge']} on {f['record_id']}: {f['reason']}")
        if failed > 10:
            print(f"    … {failed - 10} more (--json shows up to 50)")
