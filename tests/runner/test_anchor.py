"""``runner.anchor=FILE``: an anchor set with frozen judgments is re-judged each run; its
drift is a metric row with an interval, an alert can watch it, and a bad file is one line."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from evalkit.errors import ConfigError

pytestmark = pytest.mark.e2e


def write_anchor(path, flipped: int, n: int = 10) -> None:
    """n records, prompt_echo's frozen verdict on each; the first ``flipped`` frozen wrong."""
    lines = []
    for i in range(n):
        echo = i % 2 == 0  # even records copy their prompt: prompt_echo fails them
        text = f"tell me about topic number {i} please"
        passed = not echo
        if i < flipped:
            passed = not passed
        lines.append({"record_id": f"a{i}", "input": text,
                      "output": text if echo else f"Here is an original answer {i}.",
                      "anchor": {"prompt_echo": {"passed": passed}}})
    path.write_text("\n".join(json.dumps(x) for x in lines))


def test_the_anchor_sets_drift_is_a_metric_and_an_alert(tmp_path, monkeypatch):
    import evalkit

    monkeypatch.chdir(tmp_path)
    write_anchor(tmp_path / "anchor.jsonl", flipped=3)
    run = evalkit.run("quickstart", [
        "source.limit=20", "runner.anchor=anchor.jsonl",
        "alerts=[{metric: anchor.prompt_echo.drift, value: 0.2, severity: warning}]"])
    row = next(r for r in run.metrics.to_pylist() if r["metric"] == "anchor.prompt_echo.drift")
    assert row["value"] == pytest.approx(0.3) and row["n_judged"] == 10
    assert row["ci_low"] < 0.3 < row["ci_high"]
    assert [a["metric"] for a in run.alerts.to_pylist()] == ["anchor.prompt_echo.drift"]
    anchored = pq.read_table(run.run_dir / "anchor.parquet")
    assert anchored.num_rows == 10 and set(anchored.column("judge").to_pylist()) == {
        "prompt_echo"}
    # the anchor records stay out of the run's own tables
    assert not [r for r in run.records.column("record_id").to_pylist() if r.startswith("a")]
    (tmp_path / "bad.jsonl").write_text('{"record_id": "x", "anchor": {"nope": {"value": 1}}}')
    with pytest.raises(ConfigError, match="bad.jsonl:1: 'nope' is not a judge"):
        evalkit.run("quickstart", ["runner.anchor=bad.jsonl"])
