"""What ``source.shard=i/n`` costs a Langfuse server: one read of a week against the fake
server, unsharded, then as ``n`` time shards (``shard_by: time``: each lists its slice) and as
``n`` record-id shards (``shard_by: record_id``: each reads the week, the runner keeps its
part). Prints, for each, the observations and scores the server sent, its requests, the
slowest shard's read time and the records read (the time shards' must add up to the
unsharded read's, each once).

The fake runs in this process (its counters are read directly), so its CPU competes with the
reader's: the times show the shape, the object counts are exact. A first read, not counted,
lets the fake render every object once.

    .venv/bin/python bench/bench_langfuse_shards.py [--observations 20000] [--shards 4]
        [--latency 0.05]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "sources" / "langfuse"))

START, END = "2026-05-01T00:00:00Z", "2026-05-08T00:00:00Z"


def _read(url: str, work: Path, shard: tuple[int, int] | None, by: str) -> tuple[float, set]:
    from evalkit.context import RunContext
    from evalkit.sources.langfuse import LangfuseSource, LangfuseSourceConfig
    from evalkit.testing import read_source

    cfg = LangfuseSourceConfig(host=url, from_time=START, to_time=END, progress=False,
                               resume=False, resolve_retry_s=0.0, shard_by=by)
    cfg.validate()
    ctx = RunContext(run_id="bench", experiment="bench", run_dir=work / "run",
                     runs_dir=work / "runs", cache_dir=work / "cache")
    source = LangfuseSource("source", cfg, ctx)
    cut = shard is not None and not source.shard(*shard)
    t0 = time.perf_counter()
    got = read_source(source.read())
    ids = {r for t in got.batches for r in t.column("record_id").to_pylist()}
    if cut:  # what the runner keeps of a record-id shard
        assert shard is not None
        from evalkit.runner.shard import shard_of
        ids = {r for r in ids if shard_of(r, shard[1]) == shard[0]}
    return time.perf_counter() - t0, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    from fake_server import PUBLIC_KEY, SECRET_KEY, FakeLangfuse, bulk_generations, parse, score

    os.environ.update(LANGFUSE_PUBLIC_KEY=PUBLIC_KEY, LANGFUSE_SECRET_KEY=SECRET_KEY)

    server = FakeLangfuse("v4", latency_s=args.latency, validate=False)
    bulk_generations(server, args.observations, parse(START), parse(END))
    for i, obs in enumerate(list(server.observations.values())):
        if i % 10 == 0:  # one observation in ten carries an evaluator's score
            server.add_score(score(f"sc-{obs['id']}", "hallucination", "NUMERIC",
                                   parse(obs["startTime"]), observation=obs["id"],
                                   trace=obs["traceId"], value=0.5))
    server._index()
    url = server.start()
    n = args.shards
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cases = [("unsharded", [None], "time"),
                     (f"{n} time shards", [(i, n) for i in range(n)], "time"),
                     (f"{n} record-id shards", [(i, n) for i in range(n)], "record_id")]
            _read(url, Path(tmp) / "warm-up", None, "time")  # the fake renders each object once
            print(f"{args.observations:,} observations, {len(server.scores):,} scores, "
                  f"v4, {args.latency * 1000:.0f} ms a request")
            for label, shards, by in cases:
                server.served.clear()
                requests = len(server.requests)
                times, ids, total = [], set(), 0
                for k, shard in enumerate(shards):
                    seconds, got = _read(url, Path(tmp) / f"{label}-{k}", shard, by)
                    times.append(seconds)
                    total += len(got)
                    ids |= got
                assert total == len(ids), "a record in two shards"
                print(f"{label:>18}: observations sent {server.served.get('v2/observations', 0):,}"
                      f" (+{server.served.get('v2/observations by id', 0)} by id), scores sent "
                      f"{server.served.get('v3/scores', 0):,}, requests "
                      f"{len(server.requests) - requests:,}, slowest shard {max(times):.2f} s,"
                      f" records {len(ids):,}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
