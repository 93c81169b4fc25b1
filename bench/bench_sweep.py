"""A 4-job sweep across judge models, judge-bound, against the fake model server: the basic
(serial) launcher vs the joblib launcher, in one run of this script, and the ratio.

    .venv/bin/python bench/bench_sweep.py [--records 200] [--latency 0.2] [--concurrency 8]
"""

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
SERVER = ROOT / "tests" / "judges" / "llm" / "fake_llm_server.py"
EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]
experiment: bench_sweep
source: {{path: data.jsonl}}
judges:
  hallucination_llm: {{model: openai/judge-a, api_base: "{url}", api_key_env: null,
                      cache: false, concurrency: {concurrency}}}
metrics:
  flagged: {{plugin: rate, judge: hallucination_llm}}
"""
MODELS = "openai/judge-a,openai/judge-b,openai/judge-c,openai/judge-d"


def start_server(latency: float) -> tuple[subprocess.Popen, int]:
    """The fake model server in its own process (answering every judge model): it and its
    port."""
    server = subprocess.Popen([sys.executable, str(SERVER), "--latency", str(latency)],
                              stdout=subprocess.PIPE, text=True)
    return server, int(server.stdout.readline().split()[1])


def make_project(cwd: Path, port: int, records: int, concurrency: int) -> None:
    """The sweep's experiment (``conf/experiment/bench_sweep.yaml``) and its ``records``
    records (``data.jsonl``) in ``cwd``; the sweep is ``-m +experiment=bench_sweep
    judges.hallucination_llm.model=MODELS``."""
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "conf" / "experiment" / "bench_sweep.yaml").write_text(EXPERIMENT.format(
        url=f"http://127.0.0.1:{port}/v1", concurrency=concurrency))
    (cwd / "data.jsonl").write_text("".join(json.dumps(
        {"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}",
         "context": f"context {i}"}) + "\n" for i in range(records)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    server, port = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            make_project(cwd, port, args.records, args.concurrency)
            times = {}
            for launcher in ("basic", "joblib"):
                t0 = time.perf_counter()
                subprocess.run([str(ROOT / ".venv" / "bin" / "evalkit"), "run", "-m",
                                "+experiment=bench_sweep",
                                f"judges.hallucination_llm.model={MODELS}",
                                f"hydra/launcher={launcher}", "runner.summary=false",
                                *(["hydra.launcher.n_jobs=4"] if launcher == "joblib" else [])],
                               cwd=cwd, check=True, capture_output=True,
                               env={**os.environ, "EVALKIT_CACHE_DIR": str(cwd / "cache")})
                times[launcher] = time.perf_counter() - t0
    finally:
        server.kill()
    calls = 4 * args.records
    print(f"4-job sweep, {calls} judge calls ({args.latency * 1000:.0f} ms server, concurrency "
          f"{args.concurrency} per model), {os.cpu_count()} cores")
    for launcher, s in times.items():
        print(f"  {launcher:7s} {s:6.2f} s")
    print(f"  joblib / basic = {times['joblib'] / times['basic']:.2f}")


if __name__ == "__main__":
    main()
