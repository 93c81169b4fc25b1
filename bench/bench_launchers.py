"""The 4-job sweep of ``bench_sweep.py`` (same records, same fake model server) on each
launcher: basic (serial), joblib, submitit_local, submitit_slurm on a one-node Slurm cluster
on 127.0.0.1, Ray started by the sweep, and Ray on two nodes on this machine.

    .venv/bin/python bench/bench_launchers.py [--records 200] [--latency 0.2]
        [--concurrency 8] [--only basic,joblib,...]

Per launcher: the sweep's wall time; when its first run started (from the launch); the mean
time a run took (its manifest's start to end); the time the sweep spent with none of its runs
running (starting, dispatching, collecting), per job and against the serial launcher's; the
CPU of every process the sweep used (the evalkit processes, the launcher's workers, the
cluster's daemons: /proc sampled every 20 ms, less the fake server and this script); whether
the 4 runs landed ``ok`` with one sweep id and job numbers 0-3; and whether the closing table
names each job's run, status and metric as the run holds them. A launcher that cannot run
here prints one line saying why, and the bench goes on. The clusters are the tests' own
(``tests/scale/slurm_cluster.py``, ``tests/scale/ray_cluster.py``), started before the sweep
they serve and not timed."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from bench_sweep import MODELS, make_project, start_server  # noqa: E402

from evalkit.runner.app import missing_launcher  # noqa: E402
from tests.scale import ray_cluster, slurm_cluster  # noqa: E402

EVALKIT = HERE.parent / ".venv" / "bin" / "evalkit"
TICK = os.sysconf("SC_CLK_TCK")
JOBS = 4
# name: the launcher's overrides (ADDRESS: the two-node Ray cluster's), the cluster it needs
LAUNCHERS: dict[str, tuple[list[str], str | None]] = {
    "basic": (["hydra/launcher=basic"], None),
    "joblib": (["hydra/launcher=joblib", f"hydra.launcher.n_jobs={JOBS}"], None),
    "submitit_local": (["hydra/launcher=submitit_local"], None),
    "submitit_slurm": (["hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug",
                        "hydra.launcher.timeout_min=30"], "slurm"),
    "ray_local": (["hydra/launcher=ray", f"hydra.launcher.ray.init.num_cpus={JOBS}"], None),
    "ray_2nodes": (["hydra/launcher=ray", "hydra.launcher.ray.init.address=ADDRESS"], "ray"),
}


class CpuMeter:
    """CPU seconds (user + system) of this process's descendants between :meth:`start` and
    :meth:`stop`, but ``skip``'s: each process's ``/proc/PID/stat`` sampled every 20 ms
    (a process that lives less misses, and each loses its last < 20 ms). This process is made
    a subreaper, so what a daemon forks off (slurmd's job steps) stays a descendant."""

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self._base: dict[tuple[int, str], float] = {}
        self._last: dict[tuple[int, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> dict[tuple[int, str], float]:
        out, todo = {}, [os.getpid()]
        while todo:
            pid = todo.pop()
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as fh:
                        todo += [int(c) for c in fh.read().split() if int(c) != self.skip]
                if pid == os.getpid():
                    continue
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rpartition(")")[2].split()
            except (FileNotFoundError, ProcessLookupError):
                continue  # it just ended
            # (fields from the state on: utime, stime are the 12th and 13th, starttime the 20th)
            out[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / TICK
        return out

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            self._last.update(self._sample())

    def start(self) -> CpuMeter:
        self._base = self._sample()
        self._last = dict(self._base)
        self._thread.start()
        return self

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self._last.update(self._sample())
        return sum(v - self._base.get(k, 0.0) for k, v in self._last.items())


def _subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # (not Linux: the CPU of what daemons fork off is missed)


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _landed(runs: Path) -> tuple[list[dict], str]:
    """The sweep's manifests (by job) and what is wrong with them ("" when nothing)."""
    manifests = sorted((json.loads(p.read_text()) for p in runs.glob("*/*/manifest.json")),
                       key=lambda m: m.get("sweep_job") if m.get("sweep_job") is not None
                       else -1)
    if len(manifests) != JOBS:
        return manifests, f"{len(manifests)} runs"
    bad = [m.get("run_id") for m in manifests if m.get("status") != "ok"]
    sweeps = {m.get("sweep_id") for m in manifests}
    if bad:
        return manifests, f"not ok: {bad}"
    if len(sweeps) != 1 or None in sweeps:
        return manifests, f"sweep ids {sweeps}"
    if [m.get("sweep_job") for m in manifests] != list(range(JOBS)):
        return manifests, f"jobs {[m.get('sweep_job') for m in manifests]}"
    return manifests, ""


def _table_wrong(out: str, manifests: list[dict], runs: Path) -> str:
    """What the closing table gets wrong against the runs ("" when nothing): its title (the
    sweep's id, 4 jobs, 0 failed), and a row per job with its model, ``ok``, its run's id
    and the value of ``flagged`` in its run's metrics.parquet."""
    import pyarrow.parquet as pq

    from evalkit.runner.summary import _num

    sweep_id = manifests[0].get("sweep_id")
    if f"sweep {sweep_id} · {JOBS} jobs, 0 failed" not in out:
        return "no title with the sweep's id and '4 jobs, 0 failed'"
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = cells
    if sorted(rows) != list(range(JOBS)):
        return f"rows for jobs {sorted(rows)}"
    for m, model in zip(manifests, MODELS.split(","), strict=True):
        metrics = pq.read_table(next(runs.glob(f"*/{m['run_id']}")) / "metrics.parquet")
        value = next(r["value"] for r in metrics.to_pylist()
                     if r["metric"] == "flagged" and r["slice"] == "all")
        cells = rows[m["sweep_job"]]
        want = [model.split("/")[-1], "ok", m["run_id"]]
        if any(not any(w in c for c in cells) for w in want) or \
                not any(c.startswith(_num(value)) for c in cells):
            return f"job {m['sweep_job']}: {cells} (want {want}, flagged {_num(value)})"
    return ""


def _why_not(name: str) -> str | None:
    overrides, cluster = LAUNCHERS[name]
    why = missing_launcher(overrides)
    if why is None and name.startswith("ray"):
        why = ray_cluster.missing()
    if why is None and cluster == "slurm":
        why = slurm_cluster.missing()
    return why


def _sweep(name: str, cwd: Path, env: dict[str, str], address: str | None,
           serial: dict | None, server_pid: int) -> dict:
    overrides = [o.replace("ADDRESS", address or "") for o in LAUNCHERS[name][0]]
    runs = cwd / f"runs-{name}"
    meter = CpuMeter(skip=server_pid).start()
    t0 = time.time()
    proc = subprocess.run(
        [str(EVALKIT), "run", "-m", "+experiment=bench_sweep",
         f"judges.hallucination_llm.model={MODELS}", f"runner.runs_dir={runs}",
         "runner.summary=false", *overrides],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    wall = time.time() - t0
    cpu = meter.stop()
    manifests, wrong = _landed(runs)
    spans = sorted((_ts(m["started_at"]), _ts(m["finished_at"])) for m in manifests
                   if m.get("started_at") and m.get("finished_at"))
    covered, end = 0.0, t0
    for s, e in spans:  # the time at least one run was running
        covered += max(0.0, e - max(s, end))
        end = max(end, e)
    r = {"wall": wall, "cpu": cpu, "exit": proc.returncode,
         "first": spans[0][0] - t0 if spans else None,
         "run": sum(e - s for s, e in spans) / len(spans) if spans else None,
         "outside": (wall - covered) / JOBS,
         "landed": wrong or f"yes ({manifests[0]['sweep_id']})",
         "table": "" if wrong else _table_wrong(proc.stdout, manifests, runs)}
    if proc.returncode != 0:
        r["landed"] = f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-300:]}"
    base = serial or r
    r["vs_serial"] = r["outside"] - base["outside"]
    r["cpu_vs_serial"] = (r["cpu"] - base["cpu"]) / JOBS
    return r


def _print(name: str, r: dict) -> None:
    first = f"{r['first']:5.2f} s" if r["first"] is not None else "  —  "
    run = f"{r['run']:5.2f} s" if r["run"] is not None else "  —  "
    print(f"  {name:14s} wall {r['wall']:6.2f} s  first start {first}  run {run}  "
          f"outside runs/job {r['outside']:5.2f} s ({r['vs_serial']:+.2f} vs serial)  "
          f"CPU {r['cpu']:5.1f} s ({r['cpu_vs_serial']:+.2f} s/job vs serial)", flush=True)
    print(f"  {'':14s} 4 runs landed with the sweep id: {r['landed']}; closing table: "
          f"{'correct' if not r['table'] else 'WRONG: ' + r['table']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--only", default=",".join(LAUNCHERS),
                        help="launchers to run, comma-separated (basic is always run first)")
    args = parser.parse_args()
    names = ["basic", *(n for n in args.only.split(",") if n in LAUNCHERS and n != "basic")]
    _subreaper()
    print(f"4-job sweep across judge models, {JOBS * args.records} judge calls "
          f"({args.latency * 1000:.0f} ms server, concurrency {args.concurrency} per model), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start",
          flush=True)
    server, port = start_server(args.latency)
    results: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="evk-bench-") as tmp:
            cwd = Path(tmp)
            make_project(cwd, port, args.records, args.concurrency)
            (cwd / "tmp").mkdir()
            # TMPDIR: the sweep's directory (submitit's job folder) and status file, which a
            # Slurm job must reach: in the project, as on shared storage
            env = {**ray_cluster.ray_env(), "TMPDIR": str(cwd / "tmp"), "COLUMNS": "200",
                   "EVALKIT_CACHE_DIR": str(cwd / "cache")}
            for name in names:
                why = _why_not(name)
                if why is not None:
                    print(f"  {name:14s} not run: {why}", flush=True)
                    continue
                cluster, address = None, None
                try:
                    if LAUNCHERS[name][1] == "slurm":
                        cluster = slurm_cluster.SlurmCluster().start()
                        env_l = {**env, **cluster.env}
                    elif LAUNCHERS[name][1] == "ray":
                        # 2 CPUs a node: the 4 jobs at once, 2 on each node
                        cluster = ray_cluster.RayCluster(cpus_per_node=2, env=env).start()
                        address, env_l = cluster.address, env
                    else:
                        env_l = env
                    load = os.getloadavg()[0]
                    results[name] = _sweep(name, cwd, env_l, address, results.get("basic"),
                                           server.pid)
                    results[name]["load"] = (load, os.getloadavg()[0])
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"  {name:14s} not run: {str(exc).splitlines()[0][:300]}",
                          flush=True)
                    continue
                finally:
                    if cluster is not None:
                        cluster.stop()
                _print(name, results[name])
                print(f"  {'':14s} load average {results[name]['load'][0]:.2f} → "
                      f"{results[name]['load'][1]:.2f}", flush=True)
    finally:
        server.kill()
        server.wait()
    if "basic" in results:
        print("  wall / serial: " + ", ".join(
            f"{n} {r['wall'] / results['basic']['wall']:.2f}" for n, r in results.items()))


if __name__ == "__main__":
    main()
