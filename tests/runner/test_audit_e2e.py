"""``evalkit run +experiment=audit`` as a user runs it, checked against the same headline
numbers recomputed independently, in plain Python, from the bundled file."""

import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from importlib import resources

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # runs evalkit end to end

DATA = resources.files("evalkit.data") / "audit.jsonl"
LLM_ONLY = {"fabricated_tool_api", "instruction_skipping", "none"}


def failed(row):
    """A failed call, by the audit's own definition: error level or a request envelope."""
    out = row["output"]
    if isinstance(out, str):
        try:
            out = json.loads(out)
        except ValueError:
            return row["level"] == "ERROR" or not out.strip()
    is_envelope = isinstance(out, dict) and out.get("completion") is None and \
        "rawRequest" in out
    return row["level"] == "ERROR" or is_envelope


def hallucination(row):
    return next(s["value"] for s in row["scores"] if s["name"] == "Hallucination")


def correctness(row):
    return next(s["value"] for s in row["scores"] if s["name"] == "Correctness")


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


def evalkit_run(cwd, *overrides):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "evalkit", "run", "+experiment=audit",
                           "runner.run_id=e2e", *overrides], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("audit")
    proc = evalkit_run(cwd)
    assert proc.returncode == 0, proc.stderr
    run_dir = cwd / "runs" / "audit" / "e2e"
    metrics = {(m["metric"], m["slice"]): m
               for m in pq.read_table(run_dir / "metrics.parquet").to_pylist()}
    return proc, run_dir, metrics


def test_raw_vs_filtered_mean_and_rate(rows, run):
    _, _, m = run
    genuine = [r for r in rows if not failed(r)]
    assert len(rows) == 72 and len(genuine) == 44
    raw = statistics.fmean(hallucination(r) for r in rows)
    filt = statistics.fmean(hallucination(r) for r in genuine)
    assert m[("hallucination_mean.raw", "all")]["value"] == pytest.approx(raw)
    assert m[("hallucination_mean", "all")]["value"] == pytest.approx(filt)
    assert m[("hallucination_mean.filter_effect", "all")]["value"] == pytest.approx(raw - filt)
    flag_raw = sum(hallucination(r) >= 0.5 for r in rows) / len(rows)
    flag_filt = sum(hallucination(r) >= 0.5 for r in genuine) / len(genuine)
    assert m[("hallucination_rate.raw", "all")]["value"] == pytest.approx(flag_raw)
    assert m[("hallucination_rate", "all")]["value"] == pytest.approx(flag_filt)
    assert round(flag_raw, 2) == 0.86  # the audit's headline
    assert m[("pipeline_failure_rate.raw", "all")]["value"] == pytest.approx(28 / 72)
    assert m[("hallucination_mean", "all")]["n_excluded"] == 28


def test_level_by_flagged_crosstab(rows, run):
    _, _, m = run
    for level in {r["level"] for r in rows}:
        in_level = [r for r in rows if r["level"] == level]
        flagged = sum(hallucination(r) >= 0.5 for r in in_level)
        cell = m[("level_x_flagged.flagged", f"level={level}")]
        assert cell["details"]
        details = json.loads(cell["details"])
        assert details["count"] == flagged
        assert cell["value"] == pytest.approx(flagged / len(in_level))
    assert json.loads(m[("level_x_flagged.flagged", "level=ERROR")]["details"])["count"] == 28


def test_failure_modes_by_model_match_ground_truth(rows, run):
    _, run_dir, m = run
    flagged = [r for r in rows if hallucination(r) >= 0.5]
    expected = Counter()
    for r in flagged:
        mode = "none" if r["expected_mode"] in LLM_ONLY else r["expected_mode"]
        expected[(mode, "all")] += 1
        expected[(mode, f"model={r['model']}")] += 1
    got = Counter({(k[0].removeprefix("failure_modes."), k[1]):
                   json.loads(v["details"])["count"] for k, v in m.items()
                   if k[0].startswith("failure_modes.")})
    assert +got == +expected
    # and per record, not just in total
    table = pq.read_table(run_dir / "judgments").to_pylist()
    labels = {j["record_id"]: j["label"] for j in table if j["judge"] == "failure_mode"}
    for r in rows:
        truth = "none" if r["expected_mode"] in LLM_ONLY else r["expected_mode"]
        assert labels[r["id"]] == truth, r["id"]


def test_correlation_of_the_two_imported_judges(rows, run):
    _, _, m = run
    r = statistics.correlation([hallucination(x) for x in rows], [correctness(x) for x in rows])
    assert m[("judges_agree.pearson", "all")]["value"] == pytest.approx(r)
    assert abs(r) < 0.05  # the two judges barely agree, as in the audit


def test_judges_never_saw_failed_calls(rows, run):
    _, run_dir, _ = run
    judgments = pq.read_table(run_dir / "judgments").to_pylist()
    failed_ids = {r["id"] for r in rows if failed(r)}
    echo = [j for j in judgments if j["judge"] == "prompt_echo"]
    assert {j["record_id"] for j in echo if j["status"] == "skipped"} == failed_ids
    assert all(j["explanation"].startswith("excluded by filter pipeline_failure: ")
               for j in echo if j["status"] == "skipped")
    imported = [j for j in judgments if j["origin"] == "imported"]
    assert len(imported) == 144 and {j["judge"] for j in imported} == \
        {"Hallucination", "Correctness"}


def test_summary_and_alerts(run):
    proc, run_dir, _ = run
    out = proc.stdout
    assert "records 72 · excluded 28 (pipeline_failure 28)" in out
    for name in ("hallucination_mean", "level_x_flagged.flagged", "failure_modes.prompt_echo",
                 "judges_agree.pearson", "alert error: more than 10% of the calls failed"):
        assert name in out
    alerts = pq.read_table(run_dir / "alerts.parquet").to_pylist()
    assert {a["metric"] for a in alerts} == {"pipeline_failure_rate.raw",
                                              "hallucination_rate.filter_effect",
                                              "hallucination_rate"}


def test_fail_on_error_gates_ci(tmp_path):
    proc = evalkit_run(tmp_path, "runner.fail_on=error", "runner.summary=false")
    assert proc.returncode == 3
    assert "alert(s) at or above runner.fail_on=error" in proc.stderr


def test_bundled_labels_correct_the_hallucination_rate(rows, run):
    """20 bundled labels (a random sample of the genuine completions, from the data's
    expected_mode) correct the imported judge: the corrected interval covers the truth, the
    judge's own does not."""
    from evalkit.runner.summary import corrected_lines

    proc, run_dir, metrics = run
    genuine = [r for r in rows if r["level"] != "ERROR"]
    truth = sum(r["expected_mode"] in ("fabricated_tool_api", "tool_output_misinterpretation")
                for r in genuine) / len(genuine)
    corrected = metrics[("hallucination_corrected", "all")]
    judge = metrics[("hallucination_corrected.judge", "all")]
    assert corrected["ci_low"] <= truth <= corrected["ci_high"]
    assert judge["value"] > 0.7 and judge["ci_low"] > truth
    assert json.loads(corrected["details"])["n_labelled"] == 20
    lines = corrected_lines(list(metrics.values()))
    assert lines[0].startswith("corrected hallucination_corrected: 0.242") and \
        lines[0] in proc.stdout
