"""Report benchmarks (issue: the HTML report). Prints figures measured in this run:

1. generation: `evalkit report RUN` for a run of N records (default 1,000,000: the quickstart
   pipeline over bench/make_data.py's numbered records), as a fresh process and in-process,
   with the page's size (target < 10 s);
2. opening: the page opened from disk in headless Chromium (Debian's `chromium`, driven by
   Playwright) until its script has built the drill-down, then a search over the
   drill-down's records and a page turn (target: open < 3 s).

    python bench/bench_report.py [--records N] [--repeat K]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", type=Path, default=None, help="report this run instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or make_run(Path(tmp), args.records)
        page = generation(run, args.repeat)
        opening(page, args.repeat)


if __name__ == "__main__":
    main()
