"""The review page in headless Chromium (Debian's, through Playwright), end to end as a
labeler uses it: the judge's verdict hidden, labels by keyboard, progress kept across a
reload, Export, then `evalkit label import` of the downloaded file and the corrected rate
recomputed from it. Skipped, with the report tests' banner, where no browser is installed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.labels import import_labels
from evalkit.labels.sampling import draw_sample
from evalkit.metrics.corrected import CorrectedConfig, CorrectedMetric
from evalkit.results.writer import run_connection
from tests.labels.conftest import LabelledRuns, write_run
from tests.report.conftest import REQUIRED, browser_missing, chromium_path

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(browser_missing() is not None and not REQUIRED,
                                 reason=f"BROWSER TESTS SKIPPED: {browser_missing()}")]
HOSTILE = " </script><img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_label_export_import_recompute_in_chromium(labelled_runs: LabelledRuns,
                                                   tmp_path: Path) -> None:
    if browser_missing() is not None:
        pytest.fail(f"EVALKIT_REQUIRE_BROWSER=1 but the browser tests cannot run: "
                    f"{browser_missing()}")
    from playwright.sync_api import sync_playwright

    from evalkit.cli import main

    root = tmp_path / "runs"
    ids_all = sorted(labelled_runs.truth)
    run_dir = write_run(root, "run1", np.array([labelled_runs.truth[r] for r in ids_all]),
                        np.array([labelled_runs.score[r] for r in ids_all]), ["m"] * len(ids_all),
                        system=HOSTILE)
    drawn = draw_sample(run_dir, root, "j", 12, "random", seed=9)
    sample_id = drawn.table.column("sample_id")[0].as_py()
    ids = drawn.table.column("record_id").to_pylist()
    page_path = tmp_path / "review.html"
    with pytest.raises(SystemExit) as done:
        main(["review", sample_id, "--runs-dir", str(root), "--out", str(page_path)])
    assert done.value.code == 0
    assert HOSTILE not in page_path.read_text()  # escaped inside the page's JSON

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        context = browser.new_context(accept_downloads=True)
        page = context.new_page()
        console, requests = [], []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: console.append(str(exc)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_path.resolve().as_uri())
        page.wait_for_selector("body[data-ready='1']")
        assert page.inner_text("#output").endswith(HOSTILE)  # shown as text, never run
        assert page.evaluate("() => window.pwned === undefined")
        assert page.is_hidden("#verdict")  # no anchoring: the judge's verdict is hidden
        page.keyboard.press("v")
        assert "judge j: value" in page.inner_text("#verdict")
        page.keyboard.press("v")
        assert page.is_hidden("#verdict")
        page.fill("#labeler", "ann")
        page.press("#labeler", "Enter")  # Enter leaves the name field for the labelling keys
        shown = page.evaluate("() => JSON.parse(document.getElementById('data').textContent)"
                              ".records.map(r => r.id)")
        assert shown == ids, (shown, ids)
        for k, rid in enumerate(ids):
            assert rid in page.inner_text("#rid")
            if k == 5:  # a skip, then back to label it
                page.keyboard.press("s")
                page.keyboard.press("ArrowLeft")
            page.keyboard.press(str(int(labelled_runs.truth[rid])))
            if k == 6:  # progress survives a reload (localStorage)
                page.reload()
                page.wait_for_selector("body[data-ready='1']")
                assert page.inner_text("#progress") == "7 of 12 labelled"
                assert page.input_value("#labeler") == "ann"
        assert page.inner_text("#progress") == "12 of 12 labelled"
        with page.expect_download() as info:
            page.click("#export")
        exported = tmp_path / "exported.jsonl"
        info.value.save_as(exported)
        assert info.value.suggested_filename == f"labels-{sample_id}.jsonl"
        assert console == [] and all(u.startswith(("file:", "blob:")) for u in requests), \
            (console, requests)
        browser.close()

    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert {r["record_id"]: r["value"] for r in rows} == \
        {r: labelled_runs.truth[r] for r in ids}
    assert {r["run_id"] for r in rows} == {"run1"}  # the label is of that run's output
    result = import_labels(exported, root)
    assert result.appended == 12
    metric = CorrectedMetric("c", CorrectedConfig(judge="j", threshold=0.5),
                             SimpleNamespace(runs_dir=root, run_id="run1"))
    con = run_connection(run_dir)
    try:
        out = {(r["metric"], r["slice"]): r for r in metric.compute(con)}
    finally:
        con.close()
    row = out[("c", "all")]
    assert row["details"]["method"] == "ppi++" and row["details"]["n_labelled"] == 12
    assert row["details"]["sample_id"] == sample_id
    y = np.array([labelled_runs.truth[r] for r in sorted(ids)])
    assert out[("c.human", "all")]["value"] == pytest.approx(y.mean())
