"""The quickstart as a new user runs it: one command, no key, no network, a run directory
with every table, and a summary that tells the whole story."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    cwd = tmp_path_factory.mktemp("quickstart")
    # a secret in the environment, pulled into the config through an interpolation
    proc = run_cli("run", "+experiment=quickstart",
                   "+source.fields.reference=${oc.env:OPENAI_API_KEY}",
                   "+judges.prompt_echo_copy={plugin: prompt_echo, threshold: 0.8}",
                   cwd=cwd, env={"OPENAI_API_KEY": SECRET})
    return cwd, proc.stdout


def test_summary_shows_counts_metrics_and_alerts(quickstart: tuple[Path, str]) -> None:
    _, out = quickstart
    assert "records 160" in out and "excluded 40 (pipeline_failure 40)" in out
    assert "rejected 0" in out
    for name in ("echo_rate", "echo_mean", "refusal_rate", "prompt_echo", "refusal"):
        assert name in out
    assert "alert warning" in out


def test_run_directory_holds_every_table(quickstart: tuple[Path, str]) -> None:
    cwd, _ = quickstart
    (run,) = run_dirs(cwd, "quickstart")
    for name in ("records", "metrics", "alerts", "rejects"):
        assert (run / f"{name}.parquet").is_file()
    assert list((run / "judgments").glob("part-*.parquet"))
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
    records = pq.read_table(run / "records.parquet")
    assert records.num_rows == 160
    assert set(records.column("run_id").to_pylist()) == {run.name}
    # failed calls stay in records, marked, with the reason
    excluded = [r for r in records.to_pylist() if r["excluded_by"]]
    assert len(excluded) == 40
    assert all(r["excluded_by"] == "pipeline_failure" and r["exclude_reason"] for r in excluded)
    # nested paths mapped (usage.input -> input_tokens), unmapped keys kept as metadata
    row = records.to_pylist()[0]
    assert row["input_tokens"] is not None and json.loads(row["metadata"])["task"]


def test_excluded_records_are_skipped_never_scored(quickstart: tuple[Path, str]) -> None:
    cwd, _ = quickstart
    (run,) = run_dirs(cwd, "quickstart")
    judgments = pq.read_table(run / "judgments").to_pylist()
    records = {r["record_id"]: r for r in pq.read_table(run / "records.parquet").to_pylist()}
    for j in judgments:
        excluded = records[j["record_id"]]["excluded_by"] is not None
        if excluded:
            assert j["status"] == "skipped" and j["value"] is None
            assert j["explanation"].startswith("excluded by filter pipeline_failure")
        else:
            assert j["status"] == "ok" and j["value"] is not None


def test_metric_rows_carry_denominators(quickstart: tuple[Path, str]) -> None:
    cwd, _ = quickstart
    (run,) = run_dirs(cwd, "quickstart")
    rows = pq.read_table(run / "metrics.parquet").to_pylist()
    row = next(r for r in rows if r["metric"] == "echo_rate" and r["slice"] == "all")
    assert (row["n_attempted"], row["n_excluded"], row["n_judged"], row["n_unscored"]) == \
        (160, 40, 120, 0)
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    by_model = [r for r in rows if r["metric"] == "echo_rate" and r["slice"].startswith("model=")]
    assert sum(r["n_attempted"] for r in by_model) == 160


def test_manifest_has_versions_counts_timings_and_no_secret(
        quickstart: tuple[Path, str]) -> None:
    cwd, _ = quickstart
    (run,) = run_dirs(cwd, "quickstart")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    assert manifest["n_records"] == 160 and manifest["n_excluded"] == 40
    assert manifest["versions"]["evalkit"] and manifest["versions"]["evalkit-refusal"]
    assert {"read", "metrics"} <= set(manifest["timings"])
    assert manifest["judgments"]["prompt_echo"] == {"ok": 120, "skipped": 40}
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_query_over_the_run(quickstart: tuple[Path, str]) -> None:
    cwd, _ = quickstart
    out = run_cli("query", "SELECT count(*) AS n, count(excluded_by) AS excluded FROM records",
                  "--format", "json", cwd=cwd).stdout
    assert json.loads(out) == [{"n": 160, "excluded": 40}]
