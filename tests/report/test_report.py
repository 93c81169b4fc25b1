"""The report's files from real runs, read as files: what each page holds (and leaves out),
hostile text kept inert, the numbers equal to the metrics table, what was cut said, the
Markdown summary and JUnit XML for CI, the index page, the command's errors."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pyarrow.parquet as pq
import pytest

from evalkit.report import Limits, write_index, write_report
from evalkit.report._ci import junit
from evalkit.report._data import load_run
from evalkit.report._page import fmt
from tests.conftest import run_cli
from tests.report.conftest import HOSTILE_MODEL, PWNED, Runs

CELL = re.compile(r'data-metric="([^"]*)" data-slice="([^"]*)" data-value="([^"]*)"[^>]*>([^<]*)<')


def page(run_dir: Path) -> str:
    return (run_dir / "report.html").read_text(encoding="utf-8")


def drill_data(text: str, k: int = 0) -> dict:
    m = re.search(rf'<script type="application/json" id="drill-{k}">(.*?)</script>', text, re.S)
    assert m, "no drill-down data"
    return json.loads(m.group(1))


def sections(text: str) -> set[str]:
    return set(re.findall(r'data-section="([^"]+)"', text))


def charts(text: str) -> list[str]:
    return re.findall(r'<figure class="chart" data-chart="([^"]+)">', text)


def metric_values(run_dir: Path) -> dict[tuple[str, str], float | None]:
    rows = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    return {(r["metric"], r["slice"]): r["value"] for r in rows}


def test_runner_report_true_writes_page_summary_and_junit(runs: Runs) -> None:
    for name in ("report.html", "report.md", "report.junit.xml"):
        assert (runs.quickstart / name).is_file()
    assert f"report: {Path('runs') / 'quickstart' / runs.quickstart.name / 'report.html'}" in \
        runs.quickstart_stdout
    assert not [p for p in runs.quickstart.iterdir() if ".tmp-" in p.name]


def test_page_is_self_contained(runs: Runs) -> None:
    for run_dir in (runs.quickstart, runs.audit, runs.judge_agreement, runs.signals):
        text = page(run_dir)
        # nothing is fetched: no src/href to anything but the page itself or data: URIs
        assert not re.search(r'(?:src|href)="(?!data:|#)[^"]+"', text), run_dir
        assert "<metadata>" not in text and "<link rel=\"stylesheet\"" not in text
        assert "default-src 'none'" in text  # the CSP forbids any request


def test_numbers_shown_equal_the_metrics_table(runs: Runs) -> None:
    for run_dir in (runs.quickstart, runs.audit, runs.judge_agreement, runs.signals):
        values = metric_values(run_dir)
        cells = CELL.findall(page(run_dir))
        assert len(cells) >= len(values)  # the full table shows every row
        for metric, slice_, data, shown in cells:
            metric, slice_ = html.unescape(metric), html.unescape(slice_)
            expected = values[(metric, slice_)]
            assert html.unescape(shown) == fmt(expected), (metric, slice_)
            if expected is None or (isinstance(expected, float) and math.isnan(expected)):
                assert data in ("", "nan")
            else:
                assert float(data) == expected


def test_each_section_is_there_only_when_the_run_has_its_metrics(runs: Runs) -> None:
    quick, audit, agree, sig = (page(d) for d in (runs.quickstart, runs.audit,
                                                  runs.judge_agreement, runs.signals))
    assert {"headline", "filters", "distributions", "records", "alerts"} <= sections(quick)
    assert not {"calibration", "agreement", "crosstabs", "across"} & sections(quick)
    assert not [c for c in charts(quick) if c.startswith(("reliability:", "crosstab:"))]
    assert {"crosstabs", "agreement"} <= sections(audit)
    assert {"crosstab:level_x_flagged", "crosstab:failure_modes", "agreement-matrix",
            "scatter"} <= set(charts(audit))
    assert {"agreement-matrix", "scatter"} <= set(charts(agree))
    assert "review queue" in agree and "truth positive" in agree  # disagreements, validation
    assert {"calibration", "operations"} <= sections(sig)
    assert {"reliability:ece", "latency:latency", "slices:task_completion",
            "slices:cost_per_success", "slices:edit_rate", "slices:bypass_rate"} \
        <= set(charts(sig))
    assert "calibration" not in sections(audit)
    for text in (quick, audit, agree, sig):  # every chart drew something
        for svg in re.findall(r'<figure class="chart"[^>]*>(.*?)</figure>', text, re.S):
            assert svg.startswith("<svg") and svg.count("<path") + svg.count("<use") >= 3


def test_hostile_text_stays_data(runs: Runs) -> None:
    text = page(runs.signals)
    assert PWNED not in text and HOSTILE_MODEL not in text
    # every script element is one the page opened: none closed early by judged text
    assert text.count("<script") == text.count("</script>") == 2
    data = drill_data(text)
    outputs = data["records"]["output"]
    assert PWNED in outputs and HOSTILE_MODEL in data["records"]["model"]
    assert html.escape(HOSTILE_MODEL, quote=True) in text  # in a chart label or a table cell


def test_sweep_gets_one_page_with_compare_verdicts(runs: Runs) -> None:
    from evalkit.commands.compare import compare

    text = (runs.sweep_page / "report.html").read_text(encoding="utf-8")
    for run_dir in runs.sweep:
        assert f'data-run-id="{run_dir.name}"' in text
    assert "across" in sections(text) and "runs:echo_rate" in charts(text)
    rows = compare(runs.sweep[0], runs.sweep[1], n_boot=2)  # the same rows, whatever n_boot
    table = text[text.index('class="verdicts"'):]
    shown = re.findall(r"<tr><td>[^<]*</td><td>([^<]*)</td><td>([^<]*)</td>", table)
    assert [(html.unescape(m), html.unescape(s)) for m, s in shown] == \
        [(r["metric"], r["slice"]) for r in rows]
    md = (runs.sweep_page / "report.md").read_text()
    assert "Against the first run" in md and runs.sweep[1].name in md
    # each run is named by what differs (the swept value), not the first, shared override
    tabs = re.findall(r'<button data-tab="\d"[^>]*>([^<]*)</button>', text)
    assert tabs == ["threshold=0.5", "threshold=0.9"]
    assert "<tr><td>threshold=0.9</td>" in table
    assert ">undefined<" not in text


def test_runs_are_named_by_the_overrides_that_differ() -> None:
    from types import SimpleNamespace

    from evalkit.report._page import run_labels

    def run(run_id, *overrides):
        return SimpleNamespace(run_id=run_id, manifest={"overrides": list(overrides)})

    shared = ("+experiment=quickstart", "++source.path=a_long/shared/path.jsonl")
    assert run_labels([run("a", *shared, "++judges.x.threshold=0.5", "runner.summary=false"),
                       run("b", *shared, "++judges.x.threshold=0.8")]) == \
        ["threshold=0.5", "threshold=0.8"]
    # two differing keys ending alike keep their whole names; a key one run lacks says so
    assert run_labels([run("a", "judges.x.threshold=1", "judges.y.threshold=2"),
                       run("b", "judges.x.threshold=3")]) == \
        ["judges.x.threshold=1, judges.y.threshold=2", "judges.x.threshold=3, "
         "judges.y.threshold unset"]
    assert run_labels([run("a", *shared), run("b", *shared)]) == ["a", "b"]


def test_drill_down_says_what_was_cut(runs: Runs, tmp_path: Path) -> None:
    files = write_report([runs.signals], tmp_path, Limits(max_records=50, text_chars=12))
    text = files.html.read_text(encoding="utf-8")
    data = drill_data(text)
    assert data["shown"] == 50 and data["total"] == 240
    assert len(data["records"]["record_id"]) == 50
    assert "the first 50 of 240 records are here" in text
    assert "texts are cut to 12 characters" in text
    assert any(o and o.endswith("characters cut]") for o in data["records"]["output"])
    judges = data["judges"]
    assert set(judges) == {"prompt_echo", "tool_success_mismatch"}
    assert all(len(col) == 50 for j in judges.values() for col in j.values())


def test_markdown_summary_for_ci(runs: Runs) -> None:
    md = (runs.quickstart / "report.md").read_text()
    values = metric_values(runs.quickstart)
    assert f"| echo_rate | {fmt(values[('echo_rate', 'all')])} |" in md
    assert "excluded 40 (pipeline_failure 40)" in md
    assert "**warning**: more than 20% of genuine completions echo their prompt" in md
    sig = (runs.signals / "report.md").read_text() if (runs.signals / "report.md").exists() \
        else None
    if sig is not None:
        assert "<b>" not in sig


def test_junit_has_alerts_and_gates_as_test_cases(runs: Runs) -> None:
    files = write_report([runs.signals], runs.signals)
    suite = ET.parse(files.junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failed = cases["01 alert task_completion [all] < 0.9"].find("failure")
    assert failed is not None and failed.get("type") == "error"
    assert "hint: look at the failed outcomes in the drill-down; check the <tool> results" \
        in failed.text
    assert cases["02 alert bypass_rate [all] > 0.99"].find("failure") is None
    assert cases["run status"].find("failure") is None
    # run status, two alert rules and the judge error budget
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    run = load_run(runs.signals, Limits(max_records=1))
    run.manifest["config"]["runner"]["fail_on"] = "error"
    gate = {c.get("name"): c for c in ET.fromstring(junit([run])).iter("testcase")}
    assert "1 alert(s) at or above error" in gate["gate runner.fail_on=error"].find(
        "failure").text


def test_index_lists_every_run_and_links_reports(runs: Runs) -> None:
    failed = runs.root / "runs" / "other" / "r-failed"
    failed.mkdir(parents=True, exist_ok=True)
    (failed / "manifest.json").write_text(json.dumps(
        {"run_id": "r-failed", "experiment": "other", "status": "failed"}))
    out = write_index(runs.root / "runs")
    text = out.read_text(encoding="utf-8")
    rel = f"quickstart/{runs.quickstart.name}/report.html"
    assert f'href="{rel}"' in text
    for run_dir in (runs.audit, runs.judge_agreement):
        assert run_dir.name in text
    assert "no report: evalkit report" in text and "r-failed" in text
    assert "more than 20% of genuine completions echo their prompt" in text
    assert "echo_rate <b>" in text
    out = write_index(runs.sweep_page.parents[1])  # a sweep's page is listed first
    assert f'href="quickstart/{runs.sweep_page.name}/report.html"' in out.read_text()


def test_command_writes_reports_and_refuses_bad_arguments(runs: Runs, tmp_path: Path) -> None:
    proc = run_cli("report", runs.audit.name, "--out", str(tmp_path), "--n-boot", "0",
                   cwd=runs.root)
    assert (tmp_path / "report.html").is_file() and "wrote" in proc.stdout
    proc = run_cli("report", "no-such-run", cwd=runs.root, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "report: no run 'no-such-run'" in proc.stderr
    proc = run_cli("report", cwd=runs.root, check=False)
    assert proc.returncode == 2 and "name a run" in proc.stderr
    proc = run_cli("report", "--index", "runs", cwd=runs.root)
    assert (runs.root / "runs" / "index.html").is_file()


def test_help_and_report_package_import_no_plotting() -> None:
    code = ("import sys\nimport evalkit.report, evalkit.commands.report\n"
            "from evalkit.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().endswith("False")


@pytest.mark.parametrize("bad", ["runs", "nope"])
def test_a_directory_that_is_not_a_run_is_one_line(tmp_path: Path, bad: str) -> None:
    from evalkit.errors import EvalkitError

    (tmp_path / bad).mkdir()
    with pytest.raises(EvalkitError, match="not a run directory"):
        write_report([tmp_path / bad])


def test_ci_installs_chromium_and_requires_the_browser_tests() -> None:
    """``.ci/run`` installs Debian's Chromium every time and makes a missing browser a
    failure of the browser tests, not a skip."""
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "apt-get install" in ci and "chromium" in ci
    assert "EVALKIT_REQUIRE_BROWSER=1" in ci


def test_offline_stand_ins_are_marked_on_the_page_and_in_the_markdown(tmp_path: Path) -> None:
    """An offline judge's scores are deterministic stand-ins: the page and the Markdown say
    so at the top and mark every metric resting on them, as the run summary does."""
    run_cli("run", "+experiment=agent_sessions", "runner.report=true", cwd=tmp_path)
    (run_dir,) = (tmp_path / "runs" / "agent_sessions").iterdir()
    offline = json.loads((run_dir / "manifest.json").read_text())["offline_judges"]
    assert offline
    text = (run_dir / "report.html").read_text()
    banner = re.search(r'<div class="offline"[^>]*>(.*?)</div>', text, re.S)
    assert banner and all(name in banner.group(1) for name in offline)
    assert re.search(r'class="metric"[^>]*>[^<]+ \[offline\]<', text)
    md = (run_dir / "report.md").read_text()
    assert "**OFFLINE**" in md and "[offline]" in md
    quick = tmp_path / "q"
    quick.mkdir()
    run_cli("run", "+experiment=quickstart", "runner.report=true", cwd=quick)
    (plain,) = (quick / "runs" / "quickstart").iterdir()
    assert "[offline]" not in (plain / "report.html").read_text()
    assert "OFFLINE" not in (plain / "report.md").read_text()


def test_a_metric_no_run_has_gets_a_note_not_a_chart_of_undefined() -> None:
    from types import SimpleNamespace

    from evalkit.report._page import across_runs

    def run(run_id, threshold, value):
        return SimpleNamespace(run_id=run_id, manifest={"overrides": [f"x.t={threshold}"]},
                               metrics=[{"metric": "edit_rate", "slice": "all", "value": None,
                                         "ci_low": None, "ci_high": None, "plugin": "edit_rate"},
                                        {"metric": "echo_rate", "slice": "all", "value": value,
                                         "ci_low": None, "ci_high": None, "plugin": "rate"}])

    text = across_runs([run("a", 1, 0.2), run("b", 2, 0.3)], [], "")
    assert charts(text) == ["runs:echo_rate"]
    assert "undefined" not in text and "No run has a value for edit_rate" in text


def test_a_sweep_id_is_a_report_argument(runs: Runs, tmp_path: Path, monkeypatch) -> None:
    import argparse

    from evalkit.commands import report
    from evalkit.commands.completion import candidates

    manifest = json.loads((runs.sweep[0] / "manifest.json").read_text())
    sweep_id = manifest["sweep_id"]
    runs_dir = runs.sweep[0].parents[1]
    args = argparse.Namespace(runs=[sweep_id], index=None, runs_dir=str(runs_dir),
                              out=str(tmp_path), max_records=1000, text_chars=100, n_boot=0)
    assert report.main(args) == 0
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert [f'data-run-id="{d.name}"' in text for d in runs.sweep] == [True, True]
    assert "across" in sections(text)
    monkeypatch.chdir(runs_dir.parent)  # completion offers it too
    assert f"{sweep_id} " in candidates(f"evalkit report {sweep_id[:8]}")


def test_the_drill_downs_input_column_shows_the_users_question() -> None:
    import duckdb
    import orjson

    from evalkit.report._data import _drill
    from evalkit.results.schemas import RECORDS, conform

    chat = json.dumps([{"role": "system", "content": "You are terse. " * 20},
                       {"role": "user", "content": "first question"},
                       {"role": "assistant", "content": "an answer"},
                       {"role": "user", "content": [{"type": "text", "text": "Why is CI red?"}]}])
    con = duckdb.connect()
    records = conform([{"record_id": "a", "input": chat}, {"record_id": "b", "input": "plain"},
                       {"record_id": "c", "input": "[not json"}], RECORDS)
    con.register("records", records)
    data = orjson.loads(_drill(con, Limits(), has_judgments=False)["json"])["records"]
    assert data["question"] == ["Why is CI red?", "plain", "[not json"]
    assert data["input"][0] == chat  # the record's detail keeps the whole input


def test_the_comparison_page_puts_the_gates_first_then_the_split_and_the_flips(tmp_path):
    import json

    from evalkit.report import write_report
    from tests.comparison.test_compare_runs import NEW, write_run

    a = [i % 5 == 0 for i in range(100)]
    b = list(a)
    for i in NEW:
        b[i] = True
    metrics = {"flag_rate": {"plugin": "rate", "judge": "g", "raw": False}}
    run_a = write_run(tmp_path, "A", a, metrics=metrics)
    run_b = write_run(tmp_path, "B", b, metrics=metrics,
                      gates=[{"metric": "flag_rate", "tolerance": 0.02}])
    manifest = json.loads((run_b / "manifest.json").read_text())
    assert manifest["config"]["gates"]
    html = write_report([run_a, run_b], tmp_path / "out", n_boot=20).html.read_text()
    page = html[html.index('data-section="comparison"'):]
    gates, split, flips = (page.index("gate-fail"), page.index("Judge or system?"),
                           page.index("Records that flipped"))
    assert gates < split < flips
    assert page.count("class='change-regressed'") == 15
    assert "data-record='r001'" in page


def test_a_metric_with_no_value_in_any_slice_gets_a_note_not_a_chart() -> None:
    """Like across runs: a forest of 'no value' rows, or latency bars with no bar, says
    nothing; the metric is named below the charts instead. Labels are escaped in the SVG."""
    from types import SimpleNamespace

    from evalkit.report._page import _slices

    def row(metric, slice_, value, plugin):
        return {"metric": metric, "slice": slice_, "value": value, "ci_low": None,
                "ci_high": None, "plugin": plugin}

    run = SimpleNamespace(metrics=[
        row("score_mean", "all", None, "mean"), row("score_mean", "model=a", None, "mean"),
        row("edit_rate", "all", None, "edit_rate"),
        row("edit_rate", "model=a", None, "edit_rate"),
        row("echo_rate", "all", 0.2, "rate"), row("echo_rate", "model=<b>a</b>", 0.3, "rate"),
        row("latency.p50", "all", None, "latency"), row("latency.p95", "all", None, "latency")])
    slices = _slices(run, None)
    assert charts(slices) == ["slices:echo_rate"]
    assert "<b>a</b>" not in slices and "model=&lt;b&gt;a&lt;/b&gt;" in slices
    assert "No slice has a value for score_mean" in slices
    operations = _slices(run, ("latency", "edit_rate"))
    assert charts(operations) == []
    assert "No slice has a value for edit_rate, latency" in operations


@pytest.mark.parametrize("lo, hi, most", [(0, 1, 6), (0.283, 0.476, 5), (-3.2, 17.5, 8),
                                          (0, 300, 2), (1e-4, 3e-4, 4)])
def test_axis_ticks_are_round_inside_the_range_and_few(lo, hi, most) -> None:
    from evalkit.report._svg import nice_ticks

    ticks = nice_ticks(lo, hi, most)
    assert 2 <= len(ticks) <= most and all(lo - 1e-12 <= t <= hi + 1e-12 for t in ticks)
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:], strict=False)}
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5))
