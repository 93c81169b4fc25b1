"""Runner benchmarks (issue: the declarative runner). Prints figures measured in this run:

1. start-up: `evalkit --help` and `evalkit query "select 1"` as fresh processes (target
   < 0.5 s), and which heavy modules each one imported (litellm and Hydra must not be);
2. throughput: the quickstart pipeline (JSONL source -> pipeline_failure -> prompt_echo +
   refusal -> three metrics -> Parquet) over N generated records (default 1,000,000; target
   >= 100,000 records/s and peak memory < 2 GiB), beside the floor: a plain DuckDB
   `read_json` + aggregate of the same file.

    python bench/bench_runner.py [--records N] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
EVALKIT = str(BIN / "evalkit")
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "120"}
sys.path.insert(0, str(HERE.parent))  # the measuring helper the memory tests use

from tests.reliability.procmem import tree_rss  # noqa: E402


def timed(cmd: list[str], cwd: Path) -> tuple[float, int, float]:
    """Wall seconds, peak resident memory (MiB) and CPU seconds (user + system) of one
    command. The memory is the sum over its process tree, sampled every 20 ms (with /proc;
    else the largest single process's peak); the CPU counts its worker processes too."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL)
    peak_tree = 0
    while proc.poll() is None:
        if os.path.exists("/proc/self/statm"):
            peak_tree = max(peak_tree, tree_rss(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = max(usage.ru_maxrss, before) // 1024
    return wall, max(peak, peak_tree >> 20), usage.ru_utime + usage.ru_stime - cpu0


def startup(cwd: Path, repeat: int) -> None:
    (cwd / "runs").mkdir(exist_ok=True)
    print("start-up (fresh process each time; target < 0.5 s)")
    for label, args in [("evalkit --help", ["--help"]),
                        ('evalkit query "select 1"', ["query", "select 1"])]:
        times = [timed([EVALKIT, *args], cwd)[0] for _ in range(repeat)]
        print(f"  {label:28s} min {min(times):.3f} s  median {statistics.median(times):.3f} s")
    probe = ("import sys; from evalkit.cli import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "heavy = [m for m in ('litellm', 'hydra', 'omegaconf', 'aiohttp', 'httpx') "
             "if m in sys.modules]\nprint('HEAVY', heavy, file=sys.stderr)")
    for args in (["--help"], ["query", "select 1"]):
        err = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, env=ENV,
                             capture_output=True, text=True).stderr
        heavy = next(ln for ln in err.splitlines() if ln.startswith("HEAVY"))
        print(f"  heavy modules imported by `evalkit {' '.join(args)}`: {heavy[6:]}")


def throughput(cwd: Path, n: int) -> None:
    data = HERE / "_data" / f"numbered_{n}.jsonl"  # each record with its own case number
    if not data.exists():
        data.parent.mkdir(exist_ok=True)
        print(f"generating {n:,} records into {data} ...")
        subprocess.run([sys.executable, str(HERE / "make_data.py"), "big", str(n), str(data)],
                       check=True)
    size = data.stat().st_size / 2**20
    print(f"\nthroughput: {n:,} records, {size:,.0f} MiB of JSONL, {os.cpu_count()} cores")
    floor_sql = (f"SELECT model, count(*), avg(latency_s) FROM read_json('{data}') "
                 "GROUP BY model")
    floor, floor_rss, floor_cpu = timed([sys.executable, "-c",
                              f"import duckdb; duckdb.sql({floor_sql!r}).fetchall()"], cwd)
    print(f"  floor: DuckDB read_json + aggregate     {floor:7.2f} s  {n / floor:>10,.0f} rec/s  "
          f"peak {floor_rss:,} MiB, CPU {floor_cpu:.1f} s")
    for label, extra in [("evalkit run, default (workers auto)", []),
                         ("evalkit run, +source.workers=0", ["+source.workers=0"])]:
        wall, rss, cpu = timed([EVALKIT, "run", "+experiment=quickstart", f"source.path={data}",
                           "runner.summary=false", *extra], cwd)
        (manifest,) = sorted(cwd.glob("runs/quickstart/*/manifest.json"),
                             key=lambda p: p.stat().st_mtime)[-1:]
        m = json.loads(manifest.read_text())
        assert m["n_records"] + m["n_rejects"] == n, m
        print(f"  {label:38s}{wall:7.2f} s  {n / wall:>10,.0f} rec/s  peak {rss:,} MiB "
              f"(process tree), CPU {cpu:.1f} s")
        print(f"    ratio evalkit / floor: {wall / floor:.2f}x; target >= 100,000 rec/s: "
              f"{'met' if n / wall >= 100_000 else 'NOT met'}; peak < 2 GiB: "
              f"{'met' if rss < 2048 else 'NOT met'}")
        stages = ", ".join(f"{k} {v:.2f}s" for k, v in m["timings"].items())
        print(f"    stages (from the manifest): {stages}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        startup(cwd, args.repeat)
        throughput(cwd, args.records)


if __name__ == "__main__":
    main()
