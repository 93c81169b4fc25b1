"""The page, report.md and the JUnit file show every gate the run checked and the exit status
it gave (a run that exited 4 is not "status ok" with failures="0"), and sections say how many
records they could use (no "no disagreements" when nothing could be compared)."""

from __future__ import annotations

import copy
import json
import re
from xml.etree import ElementTree as ET

from evalkit.report._ci import junit, markdown
from evalkit.report._data import Limits, load_run
from evalkit.report._gates import exit_status
from evalkit.report._page import ci_text, run_body
from tests.report.conftest import Runs


def _every_judgment_invalid(runs: Runs):
    run = load_run(runs.signals, Limits(max_records=1))
    m = run.manifest
    judges = list(m.get("judgments") or {}) or ["j"]
    m["judgments"] = {j: {"error": 216} for j in judges}
    m["judgment_errors"] = {j: {"invalid_answer": 216} for j in judges}
    m["config"]["runner"]["max_judge_error_rate"] = 0.1
    return run


def test_a_run_that_exited_4_says_so_everywhere(runs: Runs) -> None:
    run = _every_judgment_invalid(runs)
    assert run.manifest["status"] == "ok"  # the files were written; the gate failed after
    assert exit_status(run)[0] == 4
    suite = ET.fromstring(junit([run])).find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    budget = cases["gate runner.max_judge_error_rate=0.1"].find("failure")
    assert budget is not None and "invalid_answer 216" in budget.text
    assert int(suite.get("failures")) >= 2  # the budget, and the alert that fired
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["exit_status"] == "4"
    md = markdown([run], [], "report.html")
    assert ", exit 4)" in md and "✗ gate runner.max_judge_error_rate=0.1" in md
    html = run_body(run, 0)
    assert 'data-overview="status">gate failed (exit 4)<' in html
    assert "status\">ok<" not in html
    assert re.search(r"gate runner\.max_judge_error_rate=0\.1</td><td>failed", html)


def test_a_passing_run_lists_its_gates_as_passed(runs: Runs) -> None:
    run = load_run(runs.quickstart, Limits(max_records=1))
    code, why = exit_status(run)
    assert code == 0 and why == "every gate passed"
    suite = ET.fromstring(junit([run])).find("testsuite")
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names[0] == "run status"
    assert any(n.startswith("gate runner.max_judge_error_rate=") for n in names)
    html = run_body(run, 0)
    assert "Gates the run checked" in html and "exit status 0: every gate passed" in html


def test_the_agreement_section_says_when_nothing_could_be_compared(runs: Runs) -> None:
    run = load_run(runs.judge_agreement, Limits(max_records=1))
    assert run.review
    name = next(iter(run.review))
    empty = copy.deepcopy(run)
    empty.review[name]["rows"] = []
    for row in empty.metrics:
        if row["metric"] == name and row["slice"] == "all":
            row.update(n_judged=0, value=None)
            row["details"]["undefined"] = "no judgments from 'B' in this run"
            attempted = row["n_attempted"]
    html = run_body(empty, 0)
    assert "no disagreements" not in html
    assert f"{name}: no record could be compared (0 of {attempted:,})" in html
    assert "no judgments from &#x27;B&#x27; in this run" in html or \
        "no judgments from 'B' in this run" in html
    agreeing = copy.deepcopy(run)
    agreeing.review[name]["rows"] = []
    html = run_body(agreeing, 0)
    assert re.search(rf"{re.escape(name)}: no disagreements among the [\d,]+ of [\d,]+ "
                     "records both scored", html)


def test_an_open_bound_is_shown_open() -> None:
    assert ci_text(0.52, None) == "[0.52, open)"
    assert ci_text(None, 3.0) == "(open, 3]"
    assert ci_text(None, None) == ""
    assert json.dumps(ci_text(1, 2)) == '"[1, 2]"'


def test_an_unknown_judge_price_is_null_everywhere_never_zero(runs: Runs) -> None:
    """The llm_judge run's judges use a model with no known price (openai/judge-a): the
    manifest, the runs view and the report say unknown, never 0 or $0.0000."""
    import evalkit

    manifest = json.loads((runs.llm_judge / "manifest.json").read_text())
    assert manifest["judge_calls_unpriced"] > 0
    assert manifest["judge_cost_usd"] is None
    con = evalkit.connect(str(runs.root / "runs"))
    (cost,) = con.execute("SELECT judge_cost_usd FROM runs WHERE run_id = ?",
                          [manifest["run_id"]]).fetchone()
    assert cost is None
    html = (runs.llm_judge / "report.html").read_text()
    assert 'data-overview="judge cost">unknown<' in html and "$0.0000" not in html
