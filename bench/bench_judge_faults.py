"""Judge faults: the reliability suite's scenario (tests/reliability/judge_faults.py) at a
chosen size. ``evalkit run`` judges N records against the fake model server, which answers
from a seeded fault plan (429 with Retry-After, 500, connection resets, timeouts, empty,
malformed and truncated JSON, an out-of-range score, prose around disagreeing verdicts);
every judgment is checked against what the server sent for its record. Prints the figures
the README's reliability section quotes: the fault share, how many faulted records
recovered (transient faults, bad answers), and the errors by cause from the manifest.

Usage: ``python bench/bench_judge_faults.py [--n 5000] [--seed 7] [--json]``."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.reliability.judge_faults import run_faults  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="judged records")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = run_faults(Path(tmp), n=args.n, seed=args.seed)
    figures = out.figures()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        rec = figures["recovered_share"]
        print(f"judge faults: {args.n:,} judged records (+ skipped), seed {args.seed}, "
              f"{out.seconds:.1f} s")
        print(f"  requests {out.requests:,}, faults injected {out.faults:,} "
              f"({figures['fault_share_of_requests']:.1%} of replies): "
              + ", ".join(f"{k} {v}" for k, v in sorted(out.faults_by_kind.items())))
        print(f"  records with a fault {out.faulted['any']:,}; ended ok: "
              f"{rec.get('any', 0):.1%} (with a transient fault {rec.get('transient', 0):.1%}, "
              f"with a bad answer {rec.get('answer', 0):.1%})")
        print(f"  faults within the retry budget: {out.budget['within ok']:,} of "
              f"{out.budget['within']:,} records recovered; beyond it: "
              f"{out.budget['beyond error']:,} of {out.budget['beyond']:,} ended as errors")
        print("  judgments: " + ", ".join(f"{k} {v:,}" for k, v in out.statuses.items()))
        print("  errors by cause: " + ", ".join(
            f"{k} {v}" for k, v in sorted(out.manifest_causes.items(), key=lambda kv: -kv[1])))
        print(f"  faults that became a score: {len(out.problems)}")
    if out.problems:
        print("\n".join(out.problems[:20]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
