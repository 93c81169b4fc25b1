"""Text from data never steers what shows it (docs/trust.md, "Text from data"): a run over
records whose ids, models and values carry rich markup, terminal escape sequences (CSI,
OSC 8 hidden links, a cleared screen), other C0 and C1 controls, bidi overrides, NUL, lone
surrogates, Markdown links, images, HTML, mentions and spreadsheet formulas. The summary,
alert lines, ``evalkit query`` (table, vertical, markdown, json, csv), ``compare`` and the
report's Markdown and JUnit files show each as inert, visible text: nothing crashes, nothing
vanishes, nothing reaches the terminal raw."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from evalkit.safetext import csv_cell, markdown_text, markup, visible, xml_text
from tests.conftest import run_cli

HOSTILE_MODELS = [
    "[model=x]",
    "[/]",
    "[link=https://evil.example]click[/link]",
    "\x1b]8;;https://evil.example\x1b\\hidden\x1b]8;;\x1b\\",  # OSC 8: a hidden link
    "clear\x1b[2J\x1b[H",  # CSI: clears the screen
    "c1\x9b31mred",  # C1 CSI
    "bell\x07nul\x00del\x7f",
    "rtl\u202egnp.exe",  # a bidi override
    "iso\u2066late\u2069",
    "=cmd|' /C calc'!A0",
    "@everyone [x](https://evil.example) ![i](https://evil.example/i.png) <b>hi</b> #12",
]
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _records() -> list[dict]:
    out = []
    for k, model in enumerate(HOSTILE_MODELS):
        for j in range(3):
            out.append({"id": f"r{k}-{j}[/]\x1b[1m", "model": model,
                        "input": "say hi", "output": f"hi {model}"})
    out.append({"id": "r0-0[/]\x1b[1m", "model": "dup", "input": "x", "output": "y"})
    return out


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "data.jsonl").write_text(
        "\n".join(json.dumps(r) for r in _records()) + "\n", encoding="utf-8")
    proc = run_cli(
        "run", "source=jsonl", f"source.path={root / 'data.jsonl'}", "source.record_id=id",
        "judges=[prompt_echo]", "metrics=[echo_rate]",
        "+metrics.by_model={plugin: rate, judge: prompt_echo, slice_by: [model]}",
        "runner.summary_slices=true", "runner.report=true",
        "+alerts=[{metric: by_model, slice: '*', operator: '>=', value: 0, "
        "severity: warning}]",
        cwd=root, check=False)
    (root / "run.out").write_text(proc.stdout + "\n--stderr--\n" + proc.stderr)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return root


def _inert(text: str) -> None:
    found = RAW_CONTROLS.findall(text)
    assert not found, f"raw controls {found!r} in:\n{text[-2000:]!r}"


@pytest.mark.e2e
def test_the_summary_shows_markup_and_escapes_from_data_as_text(hostile_run: Path) -> None:
    out = (hostile_run / "run.out").read_text()
    assert "Traceback" not in out and "MarkupError" not in out
    _inert(out)
    # every model shows in the alert lines, as written (escapes made visible)
    alerts = [ln for ln in out.splitlines() if ln.startswith("alert warning")]
    for model in HOSTILE_MODELS:
        assert any(f"model={visible(model)}" in ln for ln in alerts), (model, alerts)
    assert "r0-0[/]\\x1b[1m" in out  # the duplicate id's reject line


@pytest.mark.e2e
def test_query_output_is_inert_in_every_human_format(hostile_run: Path) -> None:
    sql = "SELECT record_id, model FROM records ORDER BY record_id"
    for fmt in ("table", "vertical"):
        out = run_cli("query", sql, "--format", fmt, "--max-rows", "100",
                      cwd=hostile_run).stdout
        _inert(out)
        for model in HOSTILE_MODELS:
            assert visible(model) in out, (fmt, model)
    js = run_cli("query", sql, "--format", "json", cwd=hostile_run).stdout
    _inert(js)  # json escapes them: the same values, losslessly
    assert {r["model"] for r in json.loads(js)} >= set(HOSTILE_MODELS)
    md = run_cli("query", sql, "--format", "markdown", cwd=hostile_run).stdout
    _inert(md)
    assert "](" not in md.replace("\\](", "") and "<b>" not in md and "@everyone" not in md


@pytest.mark.e2e
def test_query_csv_guards_formulas_and_can_be_told_not_to(hostile_run: Path) -> None:
    sql = "SELECT DISTINCT model, -1.5 AS x, '-2' AS y FROM records ORDER BY model"
    out = run_cli("query", sql, "--format", "csv", cwd=hostile_run).stdout
    rows = list(csv.reader(io.StringIO(out)))
    cells = [c for row in rows[1:] for c in row]
    assert "'=cmd|' /C calc'!A0" in cells
    assert not any(c.startswith(("=", "+", "@", "\t", "\r")) for c in cells)
    assert "-1.5" in cells and "-2" in cells  # plain numbers are not formulas
    target = hostile_run / "out.csv"
    run_cli("query", sql, "--out", str(target), cwd=hostile_run)
    assert "'=cmd|" in target.read_text()
    raw = run_cli("query", sql, "--format", "csv", "--csv-formulas", cwd=hostile_run).stdout
    assert "=cmd|' /C calc'!A0" in [c for row in csv.reader(io.StringIO(raw)) for c in row]


@pytest.mark.e2e
def test_compare_is_inert(hostile_run: Path) -> None:
    run_dir = next((hostile_run / "runs" / "default").iterdir())
    out = run_cli("compare", str(run_dir), str(run_dir), "--n-boot", "0",
                  cwd=hostile_run).stdout
    _inert(out)
    assert "model=[model=x]" in out


@pytest.mark.e2e
def test_the_junit_file_is_well_formed_and_keeps_every_value(hostile_run: Path) -> None:
    run_dir = next((hostile_run / "runs" / "default").iterdir())
    data = (run_dir / "report.junit.xml").read_bytes()
    root = ET.fromstring(data)  # well-formed, or this raises
    text = " ".join(" ".join([*(n.attrib.values()), n.text or ""]) for n in root.iter())
    _inert(text)
    for model in HOSTILE_MODELS:
        assert visible(model) in text, model


@pytest.mark.e2e
def test_the_pull_request_markdown_neutralises_links_images_html_mentions(
        hostile_run: Path) -> None:
    run_dir = next((hostile_run / "runs" / "default").iterdir())
    md = (run_dir / "report.md").read_text()
    _inert(md)
    assert "](" not in md.replace("\\](", "")  # no link or image
    assert "<b>" not in md and "@everyone" not in md and " #12" not in md
    assert "@\u2060everyone" in md and "\\[x\\]" in md


# the functions themselves, over any text

TEXT = st.text(st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    [*HOSTILE_MODELS, "model=[bold", "[link=x", "a\\", "\\[", "a\\\\[b", "\\\\\\[", "\\[1]"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(TEXT)
@example("\\[")  # rich's plain text reads "\\[" as "["
@example("\\[a")  # unclosed at the end: a tag before "]", plain text before " "
@example("\\\\[a")
@example("a\\")  # a backslash at the end escaped the tag after it
@example("[@\\")  # and so did one ending an unclosed tag
def test_rich_prints_markup_text_as_visible_text(text: str) -> None:
    from rich.console import Console

    text = text.replace("\t", " ")  # (rich expands tabs to spaces: harmless, not data lost)

    console = Console(file=io.StringIO(), width=10_000, color_system=None, highlight=False)
    # followed by a space, a tag, "]", "[" and the end
    console.print(f"[bold]x[/] {markup(text)} [dim]y{markup(text)}[/] \\[{markup(text)}] "
                  f"{markup(text)}\\[z] {markup(text)}", soft_wrap=True)
    shown = visible(text)
    assert console.file.getvalue() == f"x {shown} y{shown} [{shown}] {shown}[z] {shown}\n"


@settings(max_examples=300, deadline=None, derandomize=True)
@given(TEXT)
def test_xml_text_always_makes_well_formed_xml(text: str) -> None:
    node = ET.Element("case", name=xml_text(text))
    node.text = xml_text(text)
    back = ET.fromstring(ET.tostring(node, encoding="utf-8"))
    assert back.get("name") == xml_text(text) and (back.text or "") == xml_text(text)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(TEXT)
def test_markdown_text_leaves_no_link_html_or_mention(text: str) -> None:
    md = markdown_text(text)
    assert "\n" not in md and "<" not in md and ">" not in md
    assert not re.search(r"(?<!\\)[\[\]`|]", md.replace("\\\\", ""))
    assert not re.search(r"[@#]\w", md) and not re.search(r"(?i)https?://", md)


def test_csv_cell_follows_owasp() -> None:
    for bad in ("=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1", "-", "+"):
        assert csv_cell(bad) == "'" + bad
    for fine in ("1", "-1", "+2.5", "-1e-3", ".5", "a=b", "", 3, -2.0, None):
        assert csv_cell(fine) == fine
