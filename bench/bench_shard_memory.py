"""A 1M-record run sharded 8 ways (issue 20: each job stays under 2 GiB), in one run of this
script: the quickstart pipeline over the 1M-record JSONL input of `bench_runner.py`, once
unsharded and once per shard `source.shard=i/8` (one after another: each job's own peak),
then `evalkit merge` of the 8 shards, whose metrics must equal the unsharded run's (a mean
may differ in its last bit: DuckDB's threaded order of addition); and, unless --no-sweep,
the same 8 shards as one `-m` sweep on the joblib launcher.

Peak memory is the resident memory of the job's whole process tree (its JSONL workers too),
sampled every 10 ms, as the memory tests measure it (tests/reliability/procmem.py).

    .venv/bin/python bench/bench_shard_memory.py [--records 1000000] [--shards 8]
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

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
EVALKIT = str(BIN / "evalkit")
ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
sys.path.insert(0, str(HERE.parent))  # the measuring helper the memory tests use

from tests.reliability.procmem import run_measured, tree_rss  # noqa: E402

GIB = 2**30


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measured(cmd: list[str], cwd: Path) -> tuple[float, int, str]:
    """Wall seconds, peak bytes over the process tree, and stdout of one command."""
    t0 = time.perf_counter()
    proc, peak = run_measured(cmd, cwd, env=ENV, timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return wall, peak, proc.stdout


def newest_run(cwd: Path, seen: set[Path]) -> Path:
    (new,) = {p.parent for p in cwd.glob("runs/*/*/manifest.json")} - seen
    seen.add(new)
    return new


FIELDS = ("metric", "plugin", "slice", "value", "ci_low", "ci_high", "n_attempted",
          "n_excluded", "n_judged", "n_unscored", "higher_is_better", "details")


def metrics(run_dir: Path) -> list[tuple]:
    """The run's metrics, without its run id."""
    import pyarrow.parquet as pq

    table = pq.read_table(run_dir / "metrics.parquet").drop_columns(["run_id"])
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


def sweep(cwd: Path, data: Path, n: int) -> None:
    """The n shards as one sweep on the joblib launcher: the peak of the whole tree, and
    of each job's worker process (its tree) at any moment."""
    shards = ",".join(f"{i}/{n}" for i in range(n))
    cmd = [EVALKIT, "run", "-m", "+experiment=quickstart", f"source.path={data}",
           f"source.shard={shards}", "hydra/launcher=joblib", "runner.summary=false",
           "runner.runs_dir=sweep_runs"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **ENV},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_tree = peak_worker = 0
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    while proc.poll() is None:
        try:
            kids = [int(c) for c in children.read_text().split()]
        except OSError:
            kids = []
        peak_tree = max(peak_tree, tree_rss(proc.pid))
        for kid in kids:
            peak_worker = max(peak_worker, tree_rss(kid))
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"the sweep exited {proc.returncode}:\n{proc.stderr.read()[-3000:]}")
    runs = list(cwd.glob("sweep_runs/*/*/manifest.json"))
    print(f"\njoblib sweep of the {n} shards (-m, default n_jobs): {wall:.1f} s, {len(runs)} "
          f"runs; peak {peak_tree / GIB:.2f} GiB over the whole tree, {peak_worker / GIB:.2f} "
          f"GiB the largest worker's tree; load {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--no-sweep", action="store_true",
                        help="skip the joblib sweep of the shards")
    args = parser.parse_args()
    n = args.shards
    data = HERE / "_data" / f"numbered_{args.records}.jsonl"  # the input of bench_runner.py
    if not data.exists():
        data.parent.mkdir(exist_ok=True)
        print(f"generating {args.records:,} records into {data} ...")
        subprocess.run([sys.executable, str(HERE / "make_data.py"), "big", str(args.records),
                        str(data)], check=True)
    print(f"{args.records:,} records ({data.stat().st_size / 2**20:,.0f} MiB of JSONL), "
          f"{n} shards, {os.cpu_count()} cores; load {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        seen: set[Path] = set()
        run = [EVALKIT, "run", "+experiment=quickstart", f"source.path={data}",
               "runner.summary=false"]
        wall, peak, _ = measured(run, cwd)
        whole = newest_run(cwd, seen)
        print(f"  unsharded    {wall:6.1f} s  peak {peak / GIB:.2f} GiB")
        shard_dirs, peaks, walls = [], [], []
        for i in range(n):
            wall, peak, _ = measured([*run, f"source.shard={i}/{n}"], cwd)
            shard_dirs.append(newest_run(cwd, seen))
            m = json.loads((shard_dirs[-1] / "manifest.json").read_text())
            peaks.append(peak)
            walls.append(wall)
            print(f"  shard {i}/{n}    {wall:6.1f} s  peak {peak / GIB:.2f} GiB  "
                  f"({m['n_records']:,} records)", flush=True)
        print(f"  largest shard peak {max(peaks) / GIB:.2f} GiB (< 2 GiB: "
              f"{'met' if max(peaks) < 2 * GIB else 'NOT met'}); shards {sum(walls):.1f} s "
              f"in all; load {load()}")

        wall, peak, out = measured([EVALKIT, "merge", *map(str, shard_dirs)], cwd)
        merged = newest_run(cwd, seen)
        manifest = json.loads((merged / "manifest.json").read_text())
        print(f"\nevalkit merge of the {n}: {wall:.1f} s, peak {peak / GIB:.2f} GiB; "
              f"{manifest['n_records']:,} records, {manifest['n_judgments']:,} judgments")
        same = metrics(merged) == metrics(whole)
        close = True
        for a, b in zip(metrics(merged), metrics(whole), strict=True):
            for name, x, y in zip(FIELDS, a, b, strict=True):
                if x != y:
                    rel = (abs(x - y) / max(abs(x), abs(y))
                           if isinstance(x, float) and isinstance(y, float) else None)
                    close = close and rel is not None and rel < 1e-12
                    print(f"  differs: {a[0]} (slice {a[2]}) {name}: merged {x!r}, unsharded "
                          f"{y!r}" + (f" (relative {rel:.1e})" if rel is not None else ""))
        print(f"  merged metrics equal the unsharded run's: "
              f"{'yes' if same else 'to 1e-12' if close else 'NO'}")
        for row in metrics(merged):
            if row[2] == "all":  # metric, plugin, slice, value, ci_low, ci_high, ...
                print(f"    {row[0]:26s} {row[3]:.6f}  [{row[4]:.6f}, {row[5]:.6f}]"
                      if row[3] is not None and row[4] is not None
                      else f"    {row[0]:26s} {row[3]}")
        if not close:
            raise SystemExit("the merged run's metrics differ from the unsharded run's")
        if not args.no_sweep:
            sweep(cwd, data, n)


if __name__ == "__main__":
    main()
