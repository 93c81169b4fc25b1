"""Report benchmarks (issue: the HTML report). Prints figures measured in this run:

1. generation: `evalkit report RUN` for a run of N records (default 1,000,000: the quickstart
   pipeline over bench/make_data.py's numbered records), as a fresh process and in-process,
   with the page's size (target < 10 s);
2. opening: the page opened from disk in headless Chromium (Debian's `chromium`, driven by
   Playwright) until its script has built the drill-down, then a search over the
   drill-down's records and a page turn (target: open < 3 s);
3. with ``--pair N``: instead, the report of two runs of N records (a sweep's two jobs, so
   compare's paired-bootstrap verdicts are on the page), with and without the verdicts, and
   where the in-process time goes (target for N = 300: < 3 s of CPU, the fair figure on a
   shared machine; wall time is printed beside it with the load average).

    python bench/bench_report.py [--records N] [--repeat K]
    python bench/bench_report.py --pair 300 [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVALKIT = str(Path(sys.executable).parent / "evalkit")
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "120"}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic"]


def make_run(cwd: Path, n: int) -> Path:
    data = HERE / "_data" / f"numbered_{n}.jsonl"  # shared with bench_runner.py
    if not data.exists():
        data.parent.mkdir(exist_ok=True)
        print(f"generating {n:,} records into {data} ...")
        subprocess.run([sys.executable, str(HERE / "make_data.py"), "big", str(n), str(data)],
                       check=True)
    t0 = time.perf_counter()
    subprocess.run([EVALKIT, "run", "+experiment=quickstart", f"source.path={data}",
                    "runner.summary=false"], cwd=cwd, env=ENV, check=True)
    print(f"run of {n:,} records: {time.perf_counter() - t0:.1f} s (not part of the target)")
    (run,) = cwd.glob("runs/quickstart/*/manifest.json")
    return run.parent


def generation(run: Path, repeat: int) -> Path:
    from evalkit.report import write_report

    walls, cpus = [], []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([EVALKIT, "report", str(run)], env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    inproc = write_report([run])
    page = run / "report.html"
    best = min(walls)
    print(f"generation: `evalkit report RUN` (fresh process) best {best:.2f} s of {repeat} "
          f"({', '.join(f'{w:.2f}' for w in walls)}; CPU {min(cpus):.2f} s); in-process "
          f"{inproc.seconds:.2f} s; load average {os.getloadavg()[0]:.1f}; "
          f"page {page.stat().st_size / 2**20:.1f} MiB; target < 10 s: "
          f"{'met' if best < 10 else 'NOT met'}")
    return page


def opening(page: Path, repeat: int) -> None:
    chromium = os.environ.get("EVALKIT_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        print("opening: NOT MEASURED: no Chromium here (Debian: apt-get install chromium)")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        opens, searches = [], []
        for _ in range(repeat):
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.perf_counter()
            tab.goto(page.as_uri())
            tab.wait_for_selector("body[data-ready='1']", timeout=120_000)
            opens.append(time.perf_counter() - t0)
            target = tab.eval_on_selector_all("div.drill tbody td.id",
                                              "els => els.map(e => e.textContent)")[7]
            t0 = time.perf_counter()
            tab.fill("div.drill input.q", target)
            while tab.evaluate("document.querySelector('div.drill .count').textContent")\
                    .split(" ")[0] != "1":
                time.sleep(0.01)
            searches.append(time.perf_counter() - t0)
            tab.close()
        browser.close()
    best = min(opens)
    print(f"opening in Chromium until the drill-down is built: best {best:.2f} s of {repeat} "
          f"({', '.join(f'{o:.2f}' for o in opens)}); target < 3 s: "
          f"{'met' if best < 3 else 'NOT met'}")
    print(f"search for one record id (first search builds the index; 150 ms debounce "
          f"included): best {min(searches):.2f} s")


def make_pair(cwd: Path, n: int) -> list[Path]:
    """Two quickstart runs over the same N records (prompt_echo thresholds 0.5 and 0.8)."""
    import json

    from evalkit.data import __file__ as data_init

    rows = [json.loads(line) for line in
            (Path(data_init).parent / "quickstart.jsonl").read_text().splitlines()]
    data = cwd / f"pair_{n}.jsonl"
    data.write_text("".join(json.dumps({**rows[i % len(rows)], "id": f"r{i}"}) + "\n"
                            for i in range(n)))
    subprocess.run([EVALKIT, "run", "-m", "+experiment=quickstart", f"source.path={data}",
                    "judges.prompt_echo.threshold=0.5,0.8", "runner.summary=false"],
                   cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL)
    return sorted(p.parent for p in cwd.glob("runs/quickstart/*/manifest.json"))


def pair(runs: list[Path], repeat: int) -> None:
    from evalkit import report as report_mod
    from evalkit.report import write_report

    for n_boot in (200, 0):
        walls, cpus = [], []
        for _ in range(repeat):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([EVALKIT, "report", *map(str, runs), "--n-boot", str(n_boot)],
                           env=ENV, check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        # CPU time is the fair figure on a shared machine; wall time is given with the load
        cpu = min(cpus)
        print(f"report of 2 runs, --n-boot {n_boot}: CPU {cpu:.2f} s (best of {repeat}: "
              f"{', '.join(f'{c:.2f}' for c in cpus)}); wall {min(walls):.2f} s ("
              f"{', '.join(f'{w:.2f}' for w in walls)}) at load average "
              f"{os.getloadavg()[0]:.1f}" + (f"; CPU / 3 s target = {cpu / 3:.2f}: " + (
                  "met" if cpu < 3 else "NOT met") if n_boot else ""))
    spent: dict[str, float] = {}
    verdicts = report_mod._verdicts

    def timed(*args: object, **kwargs: object) -> object:
        t0 = time.process_time()
        try:
            return verdicts(*args, **kwargs)
        finally:
            spent["verdicts"] = time.process_time() - t0

    report_mod._verdicts = timed  # type: ignore[assignment]
    t0 = time.process_time()
    write_report(runs, runs[-1] / "bench-report")
    total = time.process_time() - t0
    print(f"in-process CPU {total:.2f} s: compare's verdicts {spent['verdicts']:.2f} s, "
          f"the rest (data, charts, page) {total - spent['verdicts']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", type=Path, default=None, help="report this run instead")
    parser.add_argument("--pair", type=int, default=None, metavar="N",
                        help="time the report of two runs of N records instead")
    args = parser.parse_args()
    if args.pair:
        with tempfile.TemporaryDirectory() as tmp:
            pair(make_pair(Path(tmp), args.pair), args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or make_run(Path(tmp), args.records)
        page = generation(run, args.repeat)
        opening(page, args.repeat)


if __name__ == "__main__":
    main()
