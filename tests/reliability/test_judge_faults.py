"""Judge faults: 1,200 LLM judgments against the fake model server with injected faults
(429 with Retry-After, retried within rate_limit_budget_s; 500, connection resets, timeouts,
empty content, malformed and truncated JSON, an out-of-range score, prose around
disagreeing verdicts): every record ends ok, error or skipped; no fault ever becomes a
score (each judgment checked against what the server sent for its record); transient faults
recover; errors are counted by cause in the manifest and the summary."""

from __future__ import annotations

from tests.reliability.judge_faults import JUDGE, SKIPPED, run_faults


def test_no_fault_becomes_a_score(tmp_path):
    out = run_faults(tmp_path, n=1200)
    assert out.problems == [], out.problems[:20]
    assert out.records == 1200 + SKIPPED
    assert out.faults / out.requests >= 0.3, out.figures()
    assert set(out.faults_by_kind) == {"429", "500", "reset", "timeout", "empty", "malformed",
                                       "truncated", "out_of_range", "ambiguous"}
    assert out.statuses["skipped"] == SKIPPED
    # every record whose faults fit the retry budget recovers (429s, however many, fit the
    # time budget: none is an error); every one planned beyond it ends as an error
    assert out.budget["within"] > 300 and out.budget["beyond"] > 50, out.figures()
    assert out.budget["within ok"] == out.budget["within"], out.figures()
    assert out.budget["beyond error"] == out.budget["beyond"], out.figures()
    assert set(out.manifest_causes) >= {"server_error", "connection", "timeout",
                                        "ambiguous_verdict"}
    assert "rate_limited" not in out.manifest_causes, out.figures()
    assert sum(out.manifest_causes.values()) == out.statuses["error"]
    # the summary's judgments row shows the causes
    [row] = [line for line in out.stdout.splitlines() if f" {JUDGE} " in line]
    assert all(f"{cause} {n}" in row for cause, n in out.manifest_causes.items()), row
