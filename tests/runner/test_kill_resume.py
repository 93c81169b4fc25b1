"""Real runs (``evalkit run`` subprocesses) killed with SIGKILL at named points (reading,
judging, writing, metrics; deterministic judges and an LLM judge against the fake model
server), then finished with ``--resume``: the resumed run holds exactly the files, records,
judgments, metrics, alerts and rejects of a clean run, row for row, and a killed run's parts
are never visible as data. The kill points come from ``EVALKIT_FAULT`` (evalkit/_faults.py),
so each case stops the run at the same moment every time.

The cases run as subprocesses in parallel (a module fixture); each test checks one case."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from evalkit.results.query import connect

sys.path.insert(0, str(Path(__file__).parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer  # noqa: E402

EVALKIT = str(Path(sys.executable).with_name("evalkit"))

LLM_EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]

experiment: kill_llm
source:
  path: ${evalkit.data:begin_wow.jsonl}
  record_id: id
  limit: 120
  batch_size: 30
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: ${oc.env:EVALKIT_JUDGE_API_BASE}
metrics:
  hallucination_rate: {plugin: rate, judge: hallucination_llm, slice_by: [model]}
  rubric_vs_human: {plugin: agreement, judge_a: hallucination_llm, human_label: true}
"""

# the audit: 72 records in 4 batches of 20, a filter, four judges (four parts a batch) and
# imported scores (a fifth part); the LLM run: 120 records in 4 batches of 30, one call each
CONFIGS = {
    "det": ["+experiment=audit", "+source.batch_size=20"],
    "llm": ["+experiment=kill_llm"],
}

# (case, config, EVALKIT_FAULT of the killed run, then of each resume that is killed too)
CASES: list[tuple[str, str, list[str]]] = [
    ("det-started", "det", ["kill@run_started"]),
    ("det-reading", "det", ["kill@batch_read#2"]),
    ("det-records-written", "det", ["kill@records_written#3"]),
    ("det-mid-batch", "det", ["kill@judgment_part#7"]),
    ("det-batch-done", "det", ["kill@batch_done#2"]),
    ("det-records-finished", "det", ["kill@records_finished"]),
    ("det-metric", "det", ["kill@metric_computed#2"]),
    ("det-metrics-written", "det", ["kill@metrics_written"]),
    ("det-finishing", "det", ["kill@run_finishing"]),
    ("det-killed-twice", "det", ["kill@judgment_part#3", "kill@judgment_part#9"]),
    ("llm-call", "llm", ["kill@response_cached#37"]),
    ("llm-late-call", "llm", ["kill@response_cached#100"]),
    ("llm-part", "llm", ["kill@judgment_part#2"]),
    ("llm-batch-done", "llm", ["kill@batch_done#3"]),
    ("llm-resume-killed", "llm", ["kill@response_cached#40", "kill@response_cached#30"]),
]


@dataclass
class Outcome:
    root: Path
    run_dir: Path
    killed: list[subprocess.CompletedProcess[str]]
    unfinished_seen: dict[str, Any]  # what queries showed of the killed run
    resumed: subprocess.CompletedProcess[str]
    calls: list[int]  # model calls made by each attempt (LLM cases)


def _evalkit(root: Path, args: list[str], fault: str | None, api_base: str | None,
             cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(cache), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("EVALKIT_FAULT", None)
    if fault:
        env["EVALKIT_FAULT"] = fault
    if api_base:
        env["EVALKIT_JUDGE_API_BASE"] = api_base
    return subprocess.run([EVALKIT, "run", *args, "runner.summary=false"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def _setup(root: Path) -> None:
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "kill_llm.yaml").write_text(LLM_EXPERIMENT)


def _run_case(root: Path, config: str, faults: list[str]) -> Outcome:
    _setup(root)
    server = FakeLLMServer().start() if config == "llm" else None
    url = server.url if server else None
    try:
        args = [*CONFIGS[config], "runner.run_id=r1"]
        killed, calls, seen = [], [], {}
        for k, fault in enumerate(faults):
            before = len(server.requests) if server else 0
            killed.append(_evalkit(root, args if k == 0 else [*args, "--resume", "r1"], fault,
                                   url, root / "cache"))
            calls.append((len(server.requests) if server else 0) - before)
            if k == 0:
                seen = _visible(root / "runs")
        before = len(server.requests) if server else 0
        resumed = _evalkit(root, [*args, "--resume", "r1"], None, url, root / "cache")
        calls.append((len(server.requests) if server else 0) - before)
    finally:
        if server:
            server.stop()
    experiment = "audit" if config == "det" else "kill_llm"
    return Outcome(root, root / "runs" / experiment / "r1", killed, seen, resumed, calls)


def _visible(runs: Path) -> dict[str, Any]:
    con = connect(runs)
    try:
        out = {t: con.sql(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("records", "judgments", "metrics", "alerts", "rejects")}
        out["runs"] = con.sql("SELECT run_id, status FROM runs").fetchall()
        everything = connect(runs, include_unfinished=True)
        out["judgments_if_asked"] = everything.sql("SELECT count(*) FROM judgments").fetchone()[0]
        everything.close()
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case, and a clean run of each config, as subprocesses four at a time."""
    def clean(config: str) -> Outcome:
        root = tmp_path_factory.mktemp(f"clean-{config}")
        _setup(root)
        server = FakeLLMServer().start() if config == "llm" else None
        try:
            done = _evalkit(root, [*CONFIGS[config], "runner.run_id=r1"], None,
                            server.url if server else None, root / "cache")
            calls = [len(server.requests)] if server else [0]
        finally:
            if server:
                server.stop()
        experiment = "audit" if config == "det" else "kill_llm"
        return Outcome(root, root / "runs" / experiment / "r1", [], {}, done, calls)

    tmp_path_factory.getbasetemp()  # made here: threads making it at once race (mkdir)
    with ThreadPoolExecutor(4) as pool:
        futures = {f"clean-{c}": pool.submit(clean, c) for c in CONFIGS}
        futures.update({name: pool.submit(_run_case, tmp_path_factory.mktemp(name), config,
                                          faults) for name, config, faults in CASES})
        return {name: f.result() for name, f in futures.items()}


# columns of a judgment that say how this attempt got the answer, not what it is: a call the
# killed attempt made is served from the response cache on resume (origin 'cache', each call
# of the exchange 'cached'); its cost is what it was bought at, as in a clean run
HOW_ANSWERED = {"origin", "attempts", "latency_s"}


def _answer(row: dict[str, Any]) -> dict[str, Any]:
    row = {k: v for k, v in row.items() if k not in HOW_ANSWERED}
    if row.get("exchange"):
        exchange = json.loads(row["exchange"])
        for call in exchange.get("calls", []):
            call.pop("cached", None)
        row["exchange"] = exchange
    return row


def _rows(run_dir: Path, name: str) -> list[dict[str, Any]]:
    if name == "judgments":
        paths = sorted((run_dir / "judgments").glob("part-*.parquet"))
    else:
        paths = [run_dir / f"{name}.parquet"]
    rows = [{k: v for k, v in row.items() if k != "run_id"}
            for p in paths for row in pq.read_table(p).to_pylist()]
    return [_answer(r) for r in rows] if name == "judgments" else rows


def _files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_a_killed_run_resumes_to_exactly_a_clean_run(outcomes, case):
    out = outcomes[case]
    config = next(c for name, c, _ in CASES if name == case)
    clean = outcomes[f"clean-{config}"]
    assert clean.resumed.returncode == 0, clean.resumed.stderr
    for proc in out.killed:
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-2000:])
    # the killed run is listed as interrupted (its process is gone); none of its rows is
    # visible unless asked for
    seen = out.unfinished_seen
    assert seen["runs"] == [("r1", "interrupted")]
    assert {t: seen[t] for t in ("records", "judgments", "metrics", "alerts", "rejects")} == \
        dict.fromkeys(("records", "judgments", "metrics", "alerts", "rejects"), 0)
    assert out.resumed.returncode == 0, out.resumed.stderr[-3000:]
    assert _files(out.run_dir) == _files(clean.run_dir)  # no stale part, no temporary file
    for name in ("records", "judgments", "metrics", "alerts", "rejects"):
        assert _rows(out.run_dir, name) == _rows(clean.run_dir, name), name
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    reference = json.loads((clean.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    for key in ("n_records", "n_excluded", "n_rejects", "n_judgments", "excluded_by",
                "judgments"):
        assert manifest[key] == reference[key], key
    con = connect(out.root / "runs")
    assert con.sql("SELECT status FROM runs").fetchall() == [("ok",)]
    assert con.sql("SELECT count(*) FROM judgments").fetchone()[0] == reference["n_judgments"]
    con.close()
    if config == "llm":
        # no finished call is lost to the kill: every attempt together asks the model for
        # no more answers than the clean run did, plus the calls in flight at each kill
        in_flight = 16 * len(out.killed)
        assert sum(out.calls) <= clean.calls[0] + in_flight, (out.calls, clean.calls)


def test_a_killed_llm_run_keeps_every_answer_it_was_given(outcomes):
    """Killed right after the 37th answer was stored, the resume asks for the other 83 at
    most: the 37 are in the response cache."""
    out = outcomes["llm-call"]
    clean = outcomes["clean-llm"].calls[0]
    assert out.calls[0] >= 37
    assert out.calls[1] <= clean - 37
