"""The judge-fault scenario the reliability suite asserts and bench/bench_judge_faults.py
reports: an ``evalkit run`` of the hallucination judge over N records against the fake
model server answering from a :class:`FaultPlan`, then every stored judgment checked
against what the server sent for its record."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.reliability.judge_support import (
    ANSWER,
    CAUSE,
    TRANSIENT,
    FakeLLMServer,
    FaultPlan,
    evalkit_run,
    write_records,
)

JUDGE = "hallucination_llm"
SKIPPED = 40  # failed calls (level ERROR) the pipeline_failure filter sets aside
# A 429 is retried for rate_limit_budget_s, whatever max_retries says: every record the
# plan refuses (at most 8 times, Retry-After 50 ms) fits the budget, so none may end
# rate_limited (a budget running out is tests/judges/llm/test_llm_rate_limits.py's). The
# plan's 429s come at random, not over a rate: the adaptive controller (benchmarked against
# real limits in bench/bench_rate_limits.py) is off, so that each 429 pauses the endpoint
# for its Retry-After. (On, it takes most for noise: 5,000 records in 43.4 s, the same
# judgments as off; before it told random refusals from a limit: 231 s for 1,200.)
SETTINGS = {"concurrency": 32, "timeout_s": 1.5, "max_retries": 3, "backoff_s": 0.01,
            "max_backoff_s": 0.1, "parse_retries": 1, "rate_limit_budget_s": 60,
            "adaptive": "false"}


@dataclass
class Outcome:
    """What a fault run gave, checked record by record (``problems`` lists every breach)."""

    records: int
    requests: int
    faults: int
    statuses: Counter
    causes_stored: Counter
    manifest_causes: dict[str, int]
    faulted: Counter  # records with at least one fault of this class
    recovered: Counter  # ... that ended ok
    budget: Counter  # records planned within / beyond the retry budget, and how they ended
    faults_by_kind: Counter
    seconds: float
    stdout: str
    problems: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        share = {k: self.recovered[k] / self.faulted[k] for k in self.faulted if self.faulted[k]}
        return {"judgments": self.records, "requests": self.requests,
                "fault_share_of_requests": round(self.faults / self.requests, 3),
                "records_with_faults": self.faulted["any"],
                "recovered_share": {k: round(v, 3) for k, v in share.items()},
                "within_retry_budget": {"records": self.budget["within"],
                                        "ok": self.budget["within ok"]},
                "beyond_retry_budget": {"records": self.budget["beyond"],
                                        "error": self.budget["beyond error"]},
                "statuses": dict(self.statuses), "errors_by_cause": self.manifest_causes,
                "faults_sent": dict(self.faults_by_kind), "seconds": round(self.seconds, 2)}


def run_faults(tmp: Path, n: int = 1200, seed: int = 7) -> Outcome:
    """Run the scenario over ``n`` judged records (plus the skipped ones) in ``tmp``."""
    server = FakeLLMServer().start()
    plan = FaultPlan(seed=seed, timeout_s=SETTINGS["timeout_s"] + 0.5)
    server.plan = plan
    try:
        rows = [{"input": f"Question {i}?", "output": f"Answer {i}: Paris is in France.",
                 "context": ["Paris is the capital of France."]} for i in range(n)]
        rows += [{"input": "q", "output": "upstream error", "level": "ERROR",
                  "status_message": "HTTP 500"} for _ in range(SKIPPED)]
        data = write_records(tmp / "faults.jsonl", rows)
        args = ["source=jsonl", f"source.path={data}", "+source.record_id=id",
                f"judges=[{JUDGE}]", f"judges.{JUDGE}.model=openai/fault-judge",
                f"judges.{JUDGE}.api_base={server.url}", f"runner.runs_dir={tmp / 'runs'}",
                "runner.max_judge_error_rate=null",  # the faults are the point here
                *(f"judges.{JUDGE}.{k}={v}" for k, v in SETTINGS.items())]
        t0 = time.perf_counter()
        done = evalkit_run(*args, cwd=tmp, timeout=240)
        seconds = time.perf_counter() - t0
    finally:
        server.stop()
    if done.returncode != 0:
        raise AssertionError(f"evalkit run exited {done.returncode}:\n{done.stderr[-3000:]}")
    [run_dir] = (tmp / "runs").glob("*/*/")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    table = pq.read_table(run_dir / "judgments").to_pylist()
    return check(table, manifest, plan, rows, seconds, done.stdout)


def check(judgments: list[dict[str, Any]], manifest: dict[str, Any], plan: FaultPlan,
          rows: list[dict[str, Any]], seconds: float, stdout: str) -> Outcome:
    """Every record's judgment against what the server sent for it."""
    problems: list[str] = []
    by_id = {j["record_id"]: j for j in judgments if j["judge"] == JUDGE}
    if len(by_id) != len(rows) or len(judgments) != len(rows):
        problems.append(f"{len(judgments)} judgments for {len(rows)} records")
    faulted: Counter = Counter()
    recovered: Counter = Counter()
    budget: Counter = Counter()
    causes: Counter = Counter()
    for i, row in enumerate(rows):
        j = by_id.get(f"r{i}")
        if j is None:
            problems.append(f"r{i}: no judgment")
            continue
        sent = plan.sent.get(row["output"], [])
        status = j["status"]
        if status not in ("ok", "error", "skipped"):
            problems.append(f"r{i}: status {status!r}")
        if row.get("level") == "ERROR":
            if status != "skipped" or sent:
                problems.append(f"r{i}: a failed call was judged ({status}, {len(sent)} sent)")
            continue
        kinds = {s.kind for s in sent}
        classes = ["any"] * bool(kinds - {"valid"}) + \
            ["transient"] * bool(kinds & set(TRANSIENT)) + ["answer"] * bool(kinds & set(ANSWER))
        faulted.update(classes)
        planned = plan.planned.get(row["output"], [])
        if planned:
            within = sum(k in TRANSIENT and k != "429" for k in planned) \
                <= SETTINGS["max_retries"] and \
                sum(k in ANSWER for k in planned) <= SETTINGS["parse_retries"]
            side = "within" if within else "beyond"
            budget[side] += 1
            budget[f"{side} {status}"] += 1
        last = sent[-1] if sent else None
        if status == "ok":
            recovered.update(classes)
            if last is None or last.kind != "valid" or j["value"] != last.score:
                problems.append(f"r{i}: stored {j['value']} but the server last sent {last}")
            elif j["passed"] != (last.score < 0.5):
                problems.append(f"r{i}: passed={j['passed']} for score {last.score}")
        elif status == "error":
            causes[j["error_cause"]] += 1
            if j["value"] is not None or j["passed"] is not None:
                problems.append(f"r{i}: an error with a score ({j['value']}, {j['passed']})")
            if last is None or last.kind == "valid":
                problems.append(f"r{i}: error ({j['error']}) after a valid verdict was sent")
            elif j["error_cause"] != CAUSE[last.kind]:
                problems.append(f"r{i}: cause {j['error_cause']} for a last fault {last.kind}")
        else:
            problems.append(f"r{i}: an included record skipped")
    stored = manifest.get("judgment_errors", {}).get(JUDGE, {})
    if stored != dict(causes):
        problems.append(f"manifest judgment_errors {stored} != stored causes {dict(causes)}")
    statuses = Counter(j["status"] for j in judgments)
    return Outcome(len(judgments), plan.requests(), plan.faults_sent(), statuses, causes,
                   stored, faulted, recovered, budget,
                   Counter(s.kind for log in plan.sent.values() for s in log
                           if s.kind != "valid"), seconds, stdout, problems)
