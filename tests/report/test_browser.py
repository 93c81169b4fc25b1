"""The reports opened in headless Chromium (Debian's ``chromium``, driven by Playwright) as a
reader opens them, from disk: no console error, no network request, every chart drawn, the
numbers shown equal to the metrics table, the drill-down's search, filters, pages and detail
working, hostile text inert, and a screenshot of each page kept under ``test-artifacts/``.

Where Chromium or Playwright is missing these tests are skipped, and the session's summary
says so in a banner (``EVALKIT_REQUIRE_BROWSER=1``, set by ``.ci/run``, makes that a failure)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from evalkit.report._page import fmt
from tests.conftest import run_cli
from tests.report.conftest import HOSTILE_MODEL, PWNED, REQUIRED, Runs, browser_missing

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "report"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-quic"]

pytestmark = pytest.mark.skipif(browser_missing() is not None and not REQUIRED,
                                reason=f"BROWSER TESTS SKIPPED: {browser_missing()}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = browser_missing()
    if why is not None:  # only when EVALKIT_REQUIRE_BROWSER=1 (.ci/run): else skipped above
        pytest.fail(f"EVALKIT_REQUIRE_BROWSER=1 but the browser tests cannot run: {why}")
    from playwright.sync_api import sync_playwright

    from tests.report.conftest import chromium_path

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        yield b
        b.close()


class Opened:
    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda exc: self.console.append(f"pageerror: {exc}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        t0 = time.perf_counter()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        self.seconds = time.perf_counter() - t0

    def close(self) -> None:
        self.page.close()


def wait_until(page: Any, js: str, arg: Any = None, timeout: int = 10_000) -> None:
    """Poll ``js`` (a function expression, or an expression) until it is true. Playwright's
    own wait_for_function evaluates strings inside the page, which the report's CSP forbids;
    ``evaluate`` goes through the debugging protocol and works."""
    expr = js if "=>" in js[:24] else f"() => ({js})"
    deadline = time.perf_counter() + timeout / 1000
    while True:
        if page.evaluate(expr, arg) if arg is not None else page.evaluate(expr):
            return
        if time.perf_counter() > deadline:
            raise AssertionError(f"timed out waiting for {js}")
        time.sleep(0.05)


def _pages(runs: Runs) -> dict[str, Path]:
    return {"quickstart": runs.quickstart / "report.html", "audit": runs.audit / "report.html",
            "judge_agreement": runs.judge_agreement / "report.html",
            "signals": runs.signals / "report.html", "llm_judge": runs.llm_judge / "report.html",
            "sweep": runs.sweep_page / "report.html"}


def _check_page(opened: Opened, name: str) -> None:
    page = opened.page
    assert opened.console == [], opened.console
    assert opened.requests == [opened.url], opened.requests  # the page itself, nothing else
    # every chart present and non-empty: an SVG of real size with drawn marks
    charts = page.eval_on_selector_all("figure.chart", """els => els.map(f => {
        const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : null;
        return {name: f.dataset.chart, w: box ? box.width : 0, h: box ? box.height : 0,
                marks: svg ? svg.querySelectorAll('path, rect, use, line').length : 0,
                hidden: f.closest('[hidden]') !== null};
    })""")
    assert charts, name
    for c in charts:
        if c["hidden"]:  # another run's tab: measured once that tab is shown
            continue
        assert c["w"] > 150 and c["h"] > 80 and c["marks"] >= 5, (name, c)
    assert _text_faults(page) == [], name
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _text_faults(page: Any) -> list[str]:
    """Chart text that the SVG's edge clips, text that runs into other text, a chart wider
    than the page, and charts of nothing ("undefined"), in the charts shown, as the browser
    lays them out."""
    return page.evaluate("""() => {
      const out = [];
      const width = document.documentElement.clientWidth;
      for (const f of document.querySelectorAll('figure.chart')) {
        if (f.closest('[hidden]')) continue;
        const svg = f.querySelector('svg'); const sb = svg.getBoundingClientRect();
        if (sb.right > width + 1) out.push(`${f.dataset.chart}: wider than the page`);
        const ts = [...svg.querySelectorAll('text')].map(t => [t.textContent.trim(),
          t.getBoundingClientRect()]).filter(([s, b]) => s && b.width > 0);
        for (const [s, b] of ts) {
          if (b.left < sb.left - 1 || b.right > sb.right + 1 || b.top < sb.top - 1 ||
              b.bottom > sb.bottom + 1) out.push(`${f.dataset.chart}: '${s}' clipped`);
          if (s === 'undefined') out.push(`${f.dataset.chart}: 'undefined'`);
        }
        for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
          const a = ts[i][1], c = ts[j][1];
          const ix = Math.min(a.right, c.right) - Math.max(a.left, c.left);
          const iy = Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top);
          if (ix > 2 && iy > 2)
            out.push(`${f.dataset.chart}: '${ts[i][0]}' runs into '${ts[j][0]}'`);
        }
      }
      return out;
    }""")


def _check_numbers(opened: Opened, run_dir: Path, scope: str = "") -> int:
    rows = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    values = {(r["metric"], r["slice"]): r["value"] for r in rows}
    cells = opened.page.eval_on_selector_all(
        f"{scope} td[data-metric]", "els => els.map(e => [e.dataset.metric, e.dataset.slice, "
        "e.dataset.value, e.textContent])")
    assert len(cells) >= len(values)
    for metric, slice_, data, shown in cells:
        expected = values[(metric, slice_)]
        assert shown == fmt(expected), (metric, slice_, shown)
        if expected is not None and not (isinstance(expected, float) and math.isnan(expected)):
            assert float(data) == expected
    return len(cells)


def _check_search(opened: Opened, scope: str = "") -> None:
    page = opened.page
    root = f"{scope} div.drill".strip()
    ids = page.eval_on_selector_all(f"{root} tbody td.id", "els => els.map(e => e.textContent)")
    target = ids[2]
    page.fill(f"{root} input.q", target)
    wait_until(page, 
        "([root, t]) => { const rows = document.querySelectorAll(root + ' tbody tr');"
        " return rows.length >= 1 && [...rows].every(r => r.querySelector('td.id')"
        ".textContent.includes(t)); }", [root, target])
    assert page.inner_text(f"{root} tbody tr td.id") == target
    page.click(f"{root} tbody tr")
    assert page.inner_text(f"{root} .detail h3") == f"record {target}"
    page.fill(f"{root} input.q", "")
    wait_until(page, "r => document.querySelectorAll(r + ' tbody tr').length > 3", root)


@pytest.mark.parametrize("name", ["quickstart", "audit", "judge_agreement", "signals",
                                  "llm_judge"])
def test_a_run_page_in_chromium(browser: Any, runs: Runs, name: str) -> None:
    path = _pages(runs)[name]
    opened = Opened(browser, path)
    try:
        _check_page(opened, name)
        assert _check_numbers(opened, path.parent) > 0
        _check_search(opened)
        assert opened.console == [], opened.console
    finally:
        opened.close()


def test_the_sweep_page_in_chromium(browser: Any, runs: Runs) -> None:
    opened = Opened(browser, _pages(runs)["sweep"])
    try:
        _check_page(opened, "sweep")
        page = opened.page
        for k, run_dir in enumerate(runs.sweep):
            page.click(f"nav.tabs button[data-tab='{k}']")
            scope = f"div.run[data-run='{k}']"
            assert page.is_visible(scope)
            _check_numbers(opened, run_dir, scope)
            _check_search(opened, scope)
            sizes = page.eval_on_selector_all(f"{scope} figure.chart svg",
                                              "els => els.map(s => s.getBoundingClientRect()"
                                              ".width)")
            assert sizes and min(sizes) > 150
            assert _text_faults(page) == [], k
        assert page.locator("table.verdicts tbody tr").count() > 0
        assert opened.console == [], opened.console
    finally:
        opened.close()


def test_a_judgment_shows_the_judges_exchange(browser: Any, runs: Runs) -> None:
    """The record detail shows each LLM judgment's explanation and its exchange with the
    model: every message sent and the raw reply, as the run stored them."""
    import json

    judgments = pq.read_table(runs.llm_judge / "judgments").to_pylist()
    row = next(j for j in judgments if j["judge"] == "hallucination_llm" and j["exchange"])
    call = json.loads(row["exchange"])["calls"][-1]
    opened = Opened(browser, _pages(runs)["llm_judge"])
    try:
        page = opened.page
        page.fill("div.drill input.q", row["record_id"])
        wait_until(page, "document.querySelector('div.drill .count').textContent"
                         ".startsWith('1 of')")
        page.click("div.drill tbody tr")
        box = page.locator("div.drill .judgment", has_text="hallucination_llm ·")
        box.locator("details.exchange summary").last.click()
        shown = box.locator("details.exchange").last.locator("pre").all_text_contents()
        assert shown == [m["content"] for m in call["messages"]] + [call["reply"]]
        assert row["explanation"] in box.locator("pre").first.text_content()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "exchange.png"), full_page=True)
        assert opened.console == [], opened.console
    finally:
        opened.close()


def _hostile_outputs(runs: Runs) -> int:
    """Records of the hostile model whose output is the script-closing text."""
    t = pq.read_table(runs.signals / "records.parquet").to_pylist()
    n = sum(1 for r in t if r["model"] == HOSTILE_MODEL and r["output"] == PWNED)
    assert n > 0
    return n


def test_hostile_text_is_shown_as_text_and_runs_nothing(browser: Any, runs: Runs) -> None:
    opened = Opened(browser, _pages(runs)["signals"])
    try:
        page = opened.page
        assert page.evaluate("window.__pwned") is None
        page.select_option("div.drill select.f-model", HOSTILE_MODEL)
        page.fill("div.drill input.q", "window.__pwned")
        expected = _hostile_outputs(runs)
        wait_until(page, "n => document.querySelector('div.drill .count').textContent"
                               ".startsWith(n + ' of')", str(expected))
        page.click("div.drill tbody tr")
        outputs = page.eval_on_selector_all("div.drill .detail pre",
                                            "els => els.map(e => e.textContent)")
        assert PWNED in outputs
        assert page.evaluate("window.__pwned") is None and opened.console == []
        # the filters: excluded records only, then a judge's errors (none here)
        page.fill("div.drill input.q", "")
        page.select_option("div.drill select.f-model", "")
        page.select_option("div.drill select.f-state", "excluded")
        wait_until(page, "document.querySelector('div.drill .count').textContent"
                               ".startsWith('24 of')")
        page.select_option("div.drill select.f-state", "error")
        wait_until(page, "document.querySelector('div.drill .count').textContent"
                               ".startsWith('0 of')")
    finally:
        opened.close()


def test_a_page_of_100000_records_stays_usable(browser: Any, tmp_path: Path) -> None:
    """100,000 records in the drill-down: the page opens, searches and turns pages in
    seconds (generous bounds for a loaded CI machine; bench/bench_report.py measures)."""
    data = tmp_path / "big.jsonl"
    with data.open("w") as f:
        for i in range(100_000):
            f.write(f'{{"id": "r{i:06d}", "model": "m{i % 4}", "input": "question {i}", '
                    f'"output": "answer number {i} of the run", "latency_s": {i % 7 / 3}}}\n')
    run_cli("run", "+experiment=quickstart", f"source.path={data}", "runner.summary=false",
            "runner.report=true", cwd=tmp_path,
            env={"EVALKIT_USER_CONF": str(tmp_path / "none")})
    (path,) = tmp_path.glob("runs/quickstart/*/report.html")
    opened = Opened(browser, path)
    try:
        page = opened.page
        assert opened.seconds < 20, opened.seconds
        assert page.inner_text("div.drill .count").startswith("100,000 of 100,000")
        t0 = time.perf_counter()
        page.fill("div.drill input.q", "answer number 98765 ")
        wait_until(page, "document.querySelector('div.drill .count').textContent"
                               ".startsWith('1 of')")
        assert time.perf_counter() - t0 < 10
        assert page.inner_text("div.drill tbody tr td.id") == "r098765"
        page.fill("div.drill input.q", "")
        wait_until(page, "document.querySelector('div.drill .page').textContent"
                               " === 'page 1 of 2,000' || document.querySelector("
                               "'div.drill .page').textContent === 'page 1 of 2000'")
        page.click("div.drill button.next")
        assert page.inner_text("div.drill tbody tr td.id") == "r000050"
        assert opened.console == [], opened.console
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "100k.png"))
    finally:
        opened.close()
