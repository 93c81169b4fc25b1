"""Full speed under a provider's limits nobody configured (issue 30): for each kind of limit,
``evalkit run`` (a hallucination judge, ``concurrency`` 32, no rpm/tpm) against the fake
OpenAI-compatible server in its own process, answering in 200 ms and refusing with 429 over
its limit; printed per kind: judgments ok, wall time of the judge stage against the ideal
(the calls at exactly the limit), refused requests per judgment, and the rate the endpoint
settled at (the run's manifest).

The kinds (tests/judges/llm/fake_limits.py; each rate a token bucket of one second's worth,
as OpenAI's and Anthropic's):

- requests a second (40), with an accurate ``Retry-After``/``retry-after-ms``; with no
  header at all; with OpenAI's ``x-ratelimit-*`` headers too;
- tokens a minute, scaled to a second (40 calls' worth), with and without headers;
- calls in flight (8: 40 a second at 200 ms), no header;
- requests a second lowered mid-run (60, then 30 after 200 calls);
- requests a minute, scaled: a bucket of 240 calls refilled at 20 a second, no header;
- an outage (every request refused, no header, for 8 s; then for 20 s), then 100 a second;
- no limit at all, the reference of the next kind (ideal: the calls in rounds of
  ``concurrency``);
- no limit, 5% of requests refused at random whatever the load (a 429 with no header; then
  with ``retry-after-ms: 200``): its ideal is the judge stage without a limit measured just
  before.

Goals: every judgment ok, wall within 1.10x of the ideal, at most 0.25 refused requests per
judgment. For calls in flight the ideal assumes the server's 200 ms; the calls take longer on a
loaded machine, so the same judgments with the limit configured by hand (``concurrency: 8``)
are run too, and printed as the physical limit. (The endpoint without a limit, "no slower
than today": bench_judge_concurrency.py with ``--baseline``.)

Usage: ``python bench/bench_rate_limits.py [--n 600] [--concurrency 32] [--only KIND]``."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from bench_llm_judges import PY, SERVER, evalkit_cmd, write_inputs

LATENCY = 0.2
RATE = 40.0
# the hallucination judge's calls against the fake model: ~tokens each (measured: the
# server counts the tokens it accepted, and the ideal is computed from that count)
TOKENS_PER_CALL = 260
KINDS: dict[str, dict] = {
    "requests/s, Retry-After": {"rps": RATE},
    "requests/s, no header": {"rps": RATE, "retry_after": False},
    "requests/s, x-ratelimit": {"rps": RATE, "headers": True},
    "tokens/min, no header": {"tokens_per_s": RATE * TOKENS_PER_CALL, "retry_after": False},
    "tokens/min, x-ratelimit": {"tokens_per_s": RATE * TOKENS_PER_CALL, "headers": True},
    "calls in flight": {"in_flight": int(RATE * LATENCY), "retry_after": False},
    "requests/s lowered mid-run": {"rps": 60.0, "then": [200, {"rps": 30.0}]},
    "requests/min-style, no header": {"rps": 20.0, "burst_s": 12.0, "retry_after": False},
    "8 s outage, then 100/s": {"outage_s": 8.0, "rps": 100.0, "retry_after": False},
    "20 s outage, then 100/s": {"outage_s": 20.0, "rps": 100.0, "retry_after": False},
    "no limit": {},
    "5% shed at random, no limit": {"shed": 0.05, "retry_after": False},
    "5% shed + 200 ms, no limit": {"shed": 0.05, "retry_after": False,
                                   "shed_retry_after_s": 0.2},
}


def start(limits: dict) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([PY, str(SERVER), "--latency", str(LATENCY), "--limits",
                             json.dumps(limits)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if line[:1] != ["PORT"]:
        proc.kill()
        raise RuntimeError(f"the fake server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return json.loads(resp.read())


def ideal_s(limits: dict, n: int, tokens: int, concurrency: int) -> float:
    """Seconds the n calls take at exactly the limit (its first second's burst aside); with
    no limit, in rounds of ``concurrency``."""
    if "then" in limits:
        after, later = limits["then"]
        return after / limits["rps"] + (n - after) / later["rps"]
    if "rps" in limits:  # (the bucket full at the start: its burst is taken at once)
        burst = limits["rps"] * limits.get("burst_s", 1.0) if "burst_s" in limits else 0.0
        return limits.get("outage_s", 0.0) + max(n - burst, 0.0) / limits["rps"]
    if "tokens_per_s" in limits:
        return tokens / limits["tokens_per_s"]
    if "in_flight" in limits:
        return n * LATENCY / limits["in_flight"]
    return math.ceil(n / concurrency) * LATENCY


def run(data: Path, url: str, work: Path, tag: str, conc: int, env: dict) -> dict:
    """One ``evalkit run``; its manifest."""
    runs = work / f"runs-{tag}"
    done = subprocess.run(evalkit_cmd(data, url, runs, work / f"c-{tag}", conc, "aiohttp"),
                          cwd=work, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 4):
        raise SystemExit(f"{tag}: evalkit failed:\n{done.stderr[-2000:]}")
    (path,) = runs.glob("*/*/manifest.json")
    return json.loads(path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--only", help="run the kinds whose name contains this")
    args = parser.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data, _ = write_inputs(work, args.n)
        for kind, limits in KINDS.items():
            if args.only and args.only not in kind:
                continue
            server, url = start(limits)
            try:
                manifest = run(data, url, work, str(len(rows)), args.concurrency, env)
                seen = stats(url)
                if "in_flight" in limits:  # the limit configured by hand: the physical limit
                    by_hand = run(data, url, work, f"{len(rows)}-by-hand",
                                  limits["in_flight"], env)
                    print(f"calls in flight, concurrency {limits['in_flight']} configured by "
                          f"hand: judge stage "
                          f"{by_hand['timings']['judge.hallucination_llm']:.2f} s")
            finally:
                server.kill()
            stage = manifest["timings"]["judge.hallucination_llm"]
            ok = manifest["judgments"]["hallucination_llm"].get("ok", 0)
            [settled] = manifest["endpoints"].values()
            ideal = ideal_s(limits, args.n, seen["tokens"], args.concurrency)
            rows.append((kind, ok, stage, ideal, seen["refused"], settled))
    print(f"{args.n} judgments (one call each), concurrency {args.concurrency}, no rpm/tpm/"
          f"limit configured; fake server answering in {1e3 * LATENCY:g} ms, its own "
          f"process; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"  {'limit':28} {'ok':>9} {'judge stage':>11} {'ideal':>7} {'ratio':>6} "
          f"{'refused/judgment':>16}  settled at")
    met = True
    unlimited = next((stage for kind, _, stage, *_ in rows if kind == "no limit"), None)
    for kind, ok, stage, ideal, refused, settled in rows:
        per = refused / args.n
        if "shed" in KINDS[kind]:  # not a limit: as fast as the endpoint without one
            ideal = unlimited or ideal
        good = ok == args.n and stage <= 1.10 * ideal and per <= 0.25
        if not KINDS[kind]:  # the reference, not a goal: the start of a run and its batches
            good = ok == args.n
        met &= good
        rate = settled.get("rate_per_s")
        window = settled.get("in_flight")
        print(f"  {kind:28} {ok:>4}/{args.n:<4} {stage:9.2f} s {ideal:5.1f} s "
              f"{stage / ideal:5.2f}x {per:16.3f}  {f'{rate:.1f}/s' if rate else 'unpaced'}"
              f"{f', {window} in flight' if window else ''}"
              f"{'' if good else '  <- goal not met'}")
    print(f"goals (every judgment ok, <= 1.10x the ideal, <= 0.25 refused a judgment): "
          f"{'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
