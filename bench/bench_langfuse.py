"""Reading 50,000 observations from a fake Langfuse that takes 100 ms per request.

The limit set by page size, latency and concurrency is ``ceil(requests / concurrency) ×
latency`` with ``requests = ceil(N / page size)`` (twice that on v3 with trace context: one
trace lookup per page); the target is to finish within 1.5× it.
The fake server runs in its own process (``tests/sources/langfuse/fake_server.py``) with every
observation rendered beforehand, so its CPU competes as little as possible with the reader's,
and answers each request 100 ms after it arrived: its own work (finding and assembling the
page) happens within that time, as a real server's does. It is one thread, so a round's 8
answers still leave one after another (the 1 MB writes).
Prints, for each API generation (v4: cursor pages of 1000 over window shards; v3: pages of
100) and each latency, the measured time, the limit, the ratio, and the reader's throughput
with a near-zero latency (its CPU cost: JSON parsing, mapping, Arrow), in the reader's process
and on its page workers (``--workers``: ``source.workers``), and the fake server's CPU (it
shares the machine's cores with the reader; Linux only). ``--repeat`` reads each case that many
times, each from a freshly started server (whose per-query caches start cold).

    .venv/bin/python bench/bench_langfuse.py [--observations 50000] [--latencies 0.1,0.5]
        [--repeat 5]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "sources" / "langfuse" / "fake_server.py"
START, END = "2026-05-01T00:00:00Z", "2026-05-08T00:00:00Z"


def _serve(generation: str, n: int, latency: float) -> tuple[subprocess.Popen[str], str]:
    from evalkit.sources.langfuse.mapping import V2_FIELDS

    # prerendered in the field groups the source asks for
    proc = subprocess.Popen([sys.executable, str(FAKE), "--generation", generation,
                             "--observations", str(n), "--latency", str(latency),
                             "--start", START, "--end", END, "--prerender",
                             "--fields", V2_FIELDS],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["PORT"]:
        proc.kill()
        raise SystemExit(f"fake server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}"


def _read(url: str, concurrency: int, work: Path, **options: object
          ) -> tuple[float, int, dict]:
    from evalkit.context import RunContext
    from evalkit.sources.langfuse import LangfuseSource, LangfuseSourceConfig

    cfg = LangfuseSourceConfig(host=url, from_time=START, to_time=END, concurrency=concurrency,
                               import_scores=False, progress=False, resume=False,
                               **options)  # type: ignore[arg-type]
    cfg.validate()
    ctx = RunContext(run_id="bench", experiment="bench", run_dir=work / "run",
                     runs_dir=work / "runs", cache_dir=work / "cache")
    source = LangfuseSource("source", cfg, ctx)
    t0, cpu0, children0 = time.perf_counter(), time.process_time(), _children_cpu()
    rows = sum(t.num_rows for t in source.read() if hasattr(t, "num_rows"))  # (not rejects)
    # the page workers have exited (and been reaped) when read() ends; the fake server has not
    stats = {**source.fingerprint()["stats"], "cpu_s": time.process_time() - cpu0,
             "workers_cpu_s": _children_cpu() - children0}
    return time.perf_counter() - t0, rows, stats


def _process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (``None`` without ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=50_000)
    parser.add_argument("--latencies", default="0.1,0.5,0.001",
                        help="seconds per request, comma-separated")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None,
                        help="source.workers: processes mapping v4 pages (default: one per "
                        "core; 0: in the reader)")
    parser.add_argument("--page-size", type=int, default=None,
                        help="source.page_size (default: each endpoint's maximum)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="reads of each case and latency, each from a fresh server")
    parser.add_argument("--cases", default="v4,v3,v3-no-trace-context",
                        help="v4, v3 (with the trace lookups v1 observations need for "
                        "sessions and tags: one per page), v3-no-trace-context")
    args = parser.parse_args()
    os.environ.update(LANGFUSE_PUBLIC_KEY="pk-lf-test", LANGFUSE_SECRET_KEY="sk-lf-test-secret")
    print(f"{args.observations:,} observations, concurrency {args.concurrency}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for case in args.cases.split(","):
        generation = case[:2]
        options: dict[str, object] = {"page_size": args.page_size, "workers": args.workers}
        if case.endswith("no-trace-context"):
            options["trace_context"] = False
        page = min(args.page_size or 1000, 1000 if generation == "v4" else 100)
        requests = math.ceil(args.observations / page)
        if generation == "v3" and "trace_context" not in options:
            requests *= 2  # a trace lookup per page of observations
        for latency in [float(x) for x in args.latencies.split(",")] * args.repeat:
            limit = math.ceil(requests / args.concurrency) * latency
            proc, url = _serve(generation, args.observations, latency)
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    before = _process_cpu(proc.pid)
                    seconds, rows, stats = _read(url, args.concurrency, Path(tmp), **options)
                    after = _process_cpu(proc.pid)
            finally:
                proc.terminate()
                proc.wait()
            server = "" if before is None or after is None else \
                f"; fake server {after - before:.2f} s"
            assert rows == args.observations, f"read {rows} rows, expected {args.observations}"
            print(f"{case} {latency * 1000:.0f} ms/request: {rows:,} records in "
                  f"{seconds:.2f} s ({stats['requests']} requests, pages of {page}); limit "
                  f"{limit:.2f} s; ratio {seconds / limit:.2f} (target <= 1.5); "
                  f"{rows / seconds:,.0f} records/s; CPU: reader {stats['cpu_s']:.2f} s + "
                  f"workers {stats['workers_cpu_s']:.2f} s "
                  f"({stats.get('pages_on_workers', 0)} pages) = "
                  f"{(stats['cpu_s'] + stats['workers_cpu_s']) / rows * 1e6:.0f} µs/record"
                  f"{server}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
