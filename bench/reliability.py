"""Reliability figures for the README's reliability section: the fuzz counts (the
reliability suite's property tests, scaled up: a soak), the peak memory of a real
``evalkit run`` over a file with lines from 1 byte to 200 MB, 5,000 one-line files
against the same records in one file (bench/bench_many_files.py), and a run whose judge
server streams replies of 3 GB (and six of 50 MB) at it.

    python bench/reliability.py [--scale 20] [--skip-memory] [--skip-many-files] [--skip-fuzz]

``--scale`` multiplies every fuzz test's examples (CI runs them at 1, derandomized; here the
draw is random, so each soak tries new inputs)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FUZZ_TESTS = ["tests/reliability/test_fuzz_files.py", "tests/reliability/test_fuzz_langfuse.py",
              "tests/reliability/test_fuzz_config.py"]


def fuzz(scale: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "counts.json"
        env = {**os.environ, "EVALKIT_FUZZ_SCALE": str(scale),
               "EVALKIT_FUZZ_REPORT": str(report), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *FUZZ_TESTS], cwd=ROOT, env=env, capture_output=True, text=True)
        took = time.perf_counter() - t0
        counts = json.loads(report.read_text()) if report.exists() else {}
    status = "all properties held" if proc.returncode == 0 else "FAILED"
    print(f"fuzzing (scale {scale:g}, {took:.0f} s): {status}")
    for name, c in sorted(counts.items()):
        extra = ", ".join(f"{k} {v:,}" for k, v in sorted(c.items()) if k != "examples")
        print(f"  {name:9s} {c.get('examples', 0):6,} examples; {extra}")
    if proc.returncode:
        print(proc.stdout[-4000:])
        raise SystemExit(1)


def memory() -> None:
    from tests.reliability.procmem import run_measured
    from tests.reliability.test_memory import SIZES, write_lines

    evalkit = str(Path(sys.executable).with_name("evalkit"))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "lines.jsonl"
        write_lines(data, SIZES)
        size = data.stat().st_size
        for label, extra in [("workers auto", []), ("+source.workers=0", ["+source.workers=0"])]:
            t0 = time.perf_counter()
            proc, peak = run_measured([evalkit, "run", "source=jsonl", f"source.path={data}",
                                       "+source.record_id=id", "runner.summary=false",
                                       *extra], cwd=Path(tmp))
            took = time.perf_counter() - t0
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            print(f"memory: lines of 1 byte to {max(SIZES) / 1e6:,.0f} MB ({size / 2**20:,.0f} "
                  f"MiB, {label}): peak {peak / 2**20:,.0f} MiB over the process tree "
                  f"(limit 2,048), {took:.1f} s")


def judge_replies() -> None:
    """Peak memory of ``evalkit run`` while its judge's server streams huge replies: the
    judge's ``max_response_bytes`` (8 MiB by default) stops each read, so the peak stays
    that of a small run (before the cap: 6.8 GB for one 3 GB reply, 1.27 GB for six of
    50 MB)."""
    from tests.reliability.procmem import run_measured
    from tests.trust.big_reply import BigReplyServer

    evalkit = str(Path(sys.executable).with_name("evalkit"))
    for label, size, n in [("one 3 GB reply", 3 << 30, 1), ("six 50 MB replies", 50 << 20, 6)]:
        server = BigReplyServer(size).start()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "data.jsonl"
                data.write_text("".join(json.dumps({"id": f"r{i}", "output": "Paris.",
                                                    "context": ["Paris is in France."]}) + "\n"
                                        for i in range(n)))
                t0 = time.perf_counter()
                proc, peak = run_measured(
                    [evalkit, "run", "source=jsonl", f"source.path={data}",
                     "+source.record_id=id", "+judges.h.plugin=hallucination",
                     "+judges.h.model=openai/fake", f"+judges.h.api_base={server.url}",
                     "+judges.h.cache=false", f"+judges.h.concurrency={n}",
                     "runner.max_judge_error_rate=null", "runner.summary=false"],
                    cwd=Path(tmp), env={"LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                        "EVALKIT_CACHE_DIR": str(Path(tmp) / "cache")})
                took = time.perf_counter() - t0
                errors = list(Path(tmp).glob("runs/*/*/manifest.json"))
                causes = json.loads(errors[0].read_text()).get("judgment_errors") \
                    if errors else None
        finally:
            server.stop()
        if proc.returncode:
            raise SystemExit(proc.stderr[-3000:])
        print(f"judge replies: {label}: peak {peak / 2**20:,.0f} MiB over the process tree, "
              f"{took:.1f} s, server sent {server.sent / 2**20:,.0f} MiB before the client "
              f"stopped; error causes {causes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=20)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-many-files", action="store_true")
    parser.add_argument("--skip-fuzz", action="store_true")
    args = parser.parse_args()
    if not args.skip_fuzz:
        fuzz(args.scale)
    if not args.skip_memory:
        memory()
    if not args.skip_many_files:
        sys.path.insert(0, str(ROOT / "bench"))
        from bench_many_files import many_files

        many_files(5000, repeat=1)
    judge_replies()


if __name__ == "__main__":
    main()
