"""The judge engine at high concurrency: 10,000 judge calls at concurrency 256 against the fake
OpenAI-compatible server (50 ms a call, in its own process) beside a bare aiohttp loop making
the same calls. Issue 20's target: the calls finish within 1.3x of the bare loop.

Each repeat runs, one after the other, a bare loop and an ``evalkit run`` (aiohttp transport,
a fresh response cache), and prints for each the machine's load average. Two ratios:

- **the judge stage** (the target's subject: evalkit's judge making the calls): the stage's
  seconds in the run's manifest (the batch's records read into the judge, every prompt
  rendered, every call made, parsed, cached and accounted, the judgment table built) against
  the bare loop timed inside its process: importing aiohttp (evalkit's judge stage imports
  it at its first call: evalkit imports no HTTP client before a judge needs one) and its
  loop (serialising each request body, the POST, reading and decoding the answer). The ratio
  to the loop alone is printed too;
- **the whole process**: ``evalkit run`` start to exit (interpreter, imports, Hydra, the
  source, the Parquet files, metrics) against the bare loop's whole process.

The bare loop's floor is latency-bound: ceil(n / concurrency) rounds of 50 ms, plus its own
CPU (the calls go out and come back in rounds of 256, so the client's CPU adds to each round
rather than hiding in it). The fake server must not be that floor: its CPU per answer is read
from ``/proc`` and printed as the rate it could serve on one core.

``--baseline DIR`` (another checkout of evalkit, e.g. ``git worktree add /tmp/base main``)
runs that build too in each repeat, right after this one (``PYTHONPATH=DIR``), for a change's
before and after taken together.

``--shared-limits`` also runs, in each repeat right after the plain run (and after the
baseline's), the same ``evalkit run`` as a sweep's job runs it: ``EVALKIT_LIMITS_DIR`` set to
a fresh directory, so every call takes the endpoint's slot shared across processes
(evalkit/judges/llm/_sharedlimit.py); its judge stage is printed against the plain run's.

Usage: ``python bench/bench_judge_concurrency.py [--n 10000] [--concurrency 256]
[--latency 0.05] [--repeat 3] [--baseline DIR] [--shared-limits]``."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import NamedTuple

from bench_llm_judges import (
    PY,
    Run,
    Timing,
    run_evalkit,
    served,
    start_server,
    timed,
    write_inputs,
)

# the bare loop: the same request bodies (serialised in the loop, as a client making the calls
# does), one pooled session, a semaphore; it writes the seconds of its asyncio.run, and of
# importing aiohttp before it, to a file
BARE = """
import asyncio, json, sys, time
url, conc, path, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
bodies = json.load(open(path))
t_import = time.perf_counter()
import aiohttp
async def main():
    sem = asyncio.Semaphore(conc)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        async def one(body):
            async with sem:
                async with s.post(url + "/chat/completions", data=json.dumps(body),
                                  headers={"Content-Type": "application/json"}) as r:
                    return json.loads(await r.read())["choices"][0]["message"]["content"]
        out = await asyncio.gather(*(one(b) for b in bodies))
    assert len(out) == len(bodies) and all(out)
t0 = time.perf_counter()
asyncio.run(main())
elapsed = time.perf_counter() - t0
open(seconds, "w").write(f"{elapsed} {t0 - t_import}")
"""


class Bare(NamedTuple):
    """The bare loop's process, its loop alone, and the loop with importing aiohttp (as
    evalkit's judge stage imports it, lazily, at its first call)."""

    timing: Timing
    bare_loop: float
    imports: float

    @property
    def loop(self) -> float:
        return self.bare_loop + self.imports


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_bare(url: str, conc: int, payloads: Path, work: Path) -> Bare:
    out = work / "bare-loop-seconds.txt"
    timing = timed([PY, "-c", BARE, url, str(conc), str(payloads), str(out)], work)
    loop, imports = map(float, out.read_text().split())
    return Bare(timing, loop, imports)


def load() -> float:
    return os.getloadavg()[0]


def spread(values: list[float]) -> str:
    return (f"{min(values):.2f}x best, {statistics.median(values):.2f}x median, "
            f"{max(values):.2f}x worst")


def main() -> None:
    parser = argparse.ArgumentParser(description="judge engine at high concurrency")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds a call")
    parser.add_argument("--repeat", type=int, default=3, help="bare/evalkit pairs")
    parser.add_argument("--baseline", type=Path, help="another evalkit checkout to run too")
    parser.add_argument("--shared-limits", action="store_true",
                        help="also run with EVALKIT_LIMITS_DIR set, as a sweep's job")
    args = parser.parse_args()
    n, conc = args.n, args.concurrency
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    bares: list[tuple[Bare, float]] = []
    runs: list[tuple[Run, float]] = []
    base_runs: list[tuple[Run, float]] = []
    shared_runs: list[tuple[Run, float]] = []
    base_shared: list[tuple[Run, float]] = []
    base_env = {**env, "PYTHONPATH": str(args.baseline.resolve())} if args.baseline else None
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data, payloads = write_inputs(work, n)
        server, url = start_server(args.latency)
        try:
            before = cpu_seconds(server.pid)
            run_bare(url, conc, payloads, work)  # a warm-up, not counted
            server_cpu = cpu_seconds(server.pid) - before
            for i in range(args.repeat):
                bares.append((run_bare(url, conc, payloads, work), load()))
                run = run_evalkit(data, url, work, f"run-{i}", f"cache-{i}", conc, "aiohttp",
                                  env)
                runs.append((run, load()))
                if base_env is not None:
                    base_runs.append((run_evalkit(data, url, work, f"base-{i}", f"bcache-{i}",
                                                  conc, "aiohttp", base_env), load()))
                if args.shared_limits:
                    for tag, into, build in ((f"shared-{i}", shared_runs, env),
                                             (f"bshared-{i}", base_shared, base_env)):
                        if build is None:
                            continue
                        limits = work / f"limits-{tag}"
                        into.append((run_evalkit(data, url, work, tag, f"cache-{tag}", conc,
                                                 "aiohttp", {**build, "EVALKIT_LIMITS_DIR":
                                                             str(limits)}), load()))
                for made in [run, *(b for b, _ in base_runs[-1:]),
                             *(s for s, _ in shared_runs[-1:]),
                             *(s for s, _ in base_shared[-1:])]:
                    if made.calls != n:
                        raise SystemExit(f"evalkit made {made.calls} calls, not {n}")
            with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
                in_flight = json.loads(resp.read())["max_in_flight"]
            total = served(url)
        finally:
            server.kill()

    rounds = math.ceil(n / conc)
    floor = rounds * args.latency
    print(f"{n} judge calls, concurrency {conc}, {1e3 * args.latency:g} ms a call, fake "
          f"OpenAI-compatible server in its own process ({total} requests served, at most "
          f"{in_flight} in flight); {args.repeat} pairs, bare loop then evalkit run, on "
          f"{os.cpu_count()} CPUs")
    print(f"  latency floor            {floor:6.2f} s  ({rounds} rounds of "
          f"{1e3 * args.latency:g} ms)")
    per_answer = server_cpu / n
    print(f"  fake server              {server_cpu:6.2f} s CPU for {n} answers = "
          f"{1e6 * per_answer:.0f} us each: {1 / per_answer:,.0f}/s on one core against "
          f"the {conc / args.latency:,.0f}/s asked")
    print("  pair  bare loop: import + loop (process)      evalkit: judge stage (process)"
          "      load")
    for i, ((b, bl), (r, rl)) in enumerate(zip(bares, runs, strict=True)):
        print(f"  {i:>4}  {b.imports:4.2f} + {b.bare_loop:5.2f} s ({b.timing})  "
              f"{r.stage:5.2f} s ({r.timing})  {bl:4.1f} / {rl:4.1f}")
        if base_runs:
            r, rl = base_runs[i]
            print(f"  {'':>4}  baseline {str(args.baseline):27.27}  {r.stage:5.2f} s "
                  f"({r.timing})  {'':6}{rl:4.1f}")
    pairs = list(zip([b for b, _ in bares], [r for r, _ in runs], strict=True))
    stage = [r.stage / b.loop for b, r in pairs]
    stage_alone = [r.stage / b.bare_loop for b, r in pairs]
    whole = [r.timing.wall / b.timing.wall for b, r in pairs]
    best_bare = min(b for b, _ in pairs)
    best_run = min(r for _, r in pairs)
    best_loop = min(b.loop for b, _ in pairs)
    best_alone = min(b.bare_loop for b, _ in pairs)
    best_stage = min(r.stage for _, r in pairs)
    target = best_stage / best_loop
    print(f"  bare loop: best {best_alone:.2f} s = floor + {best_alone - floor:.2f} s "
          f"(its process's CPU: {best_bare.timing.cpu:.2f} s); importing aiohttp "
          f"{min(b.imports for b, _ in pairs):.2f} s")
    print(f"  judge stage / bare loop  {target:6.2f}x  best of each, the loop with its "
          f"import of aiohttp ({best_stage:.2f} s / {best_loop:.2f} s): the target, "
          f"<= 1.3x: {'met' if target <= 1.3 else 'NOT met'}; pairs: {spread(stage)}")
    print(f"    without the import     {best_stage / best_alone:6.2f}x  best of each; pairs: "
          f"{spread(stage_alone)}")
    print(f"  whole evalkit run / bare {best_run.timing.wall / best_bare.timing.wall:6.2f}x  "
          f"best of each ({best_run.timing.wall:.2f} s / {best_bare.timing.wall:.2f} s); "
          f"pairs: {spread(whole)}")
    if base_runs:
        base_stage = min(r.stage for r, _ in base_runs)
        base_whole = min(r for r, _ in base_runs)
        print(f"  baseline build           {base_stage / best_loop:6.2f}x judge stage "
              f"({base_stage:.2f} s), {base_whole.timing.wall / best_bare.timing.wall:.2f}x "
              f"whole run ({base_whole.timing}), best of each")
    if shared_runs:
        print("  shared limits (EVALKIT_LIMITS_DIR set, as in a sweep): judge stage (process "
              "CPU, load)")
        for label, made in (("this build", shared_runs), ("baseline", base_shared)):
            if made:
                print(f"    {label:10}  " + ", ".join(
                    f"{r.stage:.2f} s ({r.timing.cpu:.2f} s CPU, load {rl:.1f})"
                    for r, rl in made))
        plain = [r.stage for r, _ in runs]
        shared = [r.stage for r, _ in shared_runs]
        print(f"    this build: shared / plain judge stage {min(shared) / min(plain):.2f}x "
              f"best of each; pairs: {spread([s / p for s, p in zip(shared, plain, strict=True)])}")
        if base_shared:
            base_plain = [r.stage for r, _ in base_runs]
            print(f"    baseline:   shared / plain judge stage "
                  f"{min(r.stage for r, _ in base_shared) / min(base_plain):.2f}x best of each")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
