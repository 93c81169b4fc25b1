"""Every installed plugin passes the conformance suite of its kind (evalkit.testing.suites),
the one a third-party author runs on theirs: one test class per plugin, made from the
registry, so a new built-in is covered the day it is registered. A plugin whose defaults do
not make a valid config gets its settings below (a new one fails here until it has them)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from evalkit.registry import KINDS, registry
from evalkit.testing.suites import SUITES

LLM = {"model": "openai/gpt-4o-mini"}

SETTINGS: dict[tuple[str, str], dict[str, Any]] = {
    ("filters", "sample"): {"fraction": 0.5},
    ("filters", "sql"): {"where": "level = 'ERROR'"},
    ("filters", "models"): {"include": ["m1"]},
    ("filters", "time_range"): {"start": "2026-01-01T00:00:00Z"},
    ("judges", "contains"): {"values": ["4"]},
    ("judges", "json_schema"): {"fields": {"answer": "int"}},
    ("judges", "regex"): {"pattern": r"\d"},
    **{("judges", name): LLM for name in (
        "citation_support", "context_relevance", "correctness", "failure_mode_llm", "geval",
        "hallucination", "pairwise", "qag_faithfulness")},
    ("judges", "geval"): {**LLM, "criteria": "Is the output correct?"},
    ("metrics", "agreement"): {"judge_a": "sample", "human_label": True,
                               "map_b": {"pass": 0.0, "fail": 1.0}},
    ("metrics", "judge_validation"): {"judge_a": "sample", "human_label": True,
                                      "map_b": {"pass": 0.0, "fail": 1.0}},
    ("metrics", "disagreements"): {"judge_a": "sample", "human_label": True,
                                   "map_b": {"pass": 0.0, "fail": 1.0}},
    ("metrics", "crosstab"): {"judge": "sample", "by": "model"},
    ("metrics", "distribution"): {"judge": "sample"},
    ("metrics", "ece"): {"correct": "outcome", "correct_map": {"success": 1.0, "failure": 0.0}},
    ("metrics", "mean"): {"judge": "sample"},
    ("metrics", "rate"): {"judge": "sample"},
    # (offline: a seeded stand-in; tests/generate runs the model calls against a fake server)
    ("generators", "llm"): {"model": "openai/gpt-4o-mini", "offline": True},
}

# plugins that need a service the tests have no stand-in for here (their own tests run them
# against fake servers): the suite checks their contract and config only
CALLS_OUT = {("sources", "langfuse"), ("sinks", "langfuse")} | {
    ("judges", name) for name in ("citation_support", "context_relevance", "correctness",
                                  "failure_mode_llm", "geval", "hallucination", "pairwise",
                                  "qag_faithfulness")}

AGENT_DATA = Path(__file__).resolve().parents[2] / "evalkit" / "data" / "agent_sessions"
LINES = [{"id": f"r{i}", "input": f"question {i}", "output": f"answer {i}", "model": "m",
          "latency_s": 0.1 * i} for i in range(5)]


def _files(kind: str, name: str, tmp_path: Path) -> dict[str, Any]:
    """Settings that point at inputs written under ``tmp_path``."""
    if (kind, name) == ("sources", "jsonl"):
        path = tmp_path / "in.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in LINES) + "not json\n")
        return {"path": str(path), "record_id": "id"}
    if (kind, name) == ("sources", "csv"):
        path = tmp_path / "in.csv"
        path.write_text("id,input,output\n" + "".join(
            f"{r['id']},{r['input']},{r['output']}\n" for r in LINES) + "x,too,many,cells\n")
        return {"path": str(path), "record_id": "id"}
    if (kind, name) == ("sources", "transcripts"):  # the bundled sample's sessions
        return {"path": str(AGENT_DATA / "claude")}
    if (kind, name) == ("sources", "otlp_json"):
        return {"path": str(AGENT_DATA / "traces" / "agent_traces.jsonl")}
    if (kind, name) == ("judges", "state_check"):
        path = tmp_path / "state.sqlite"
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE bookings (model TEXT)")
            con.execute("INSERT INTO bookings VALUES ('m1')")
        return {"database": str(path),
                "query": "SELECT count(*) > 0 FROM bookings WHERE model = $model"}
    return {}


def _suite(kind: str, name: str) -> type:
    plugin = registry().get(kind, name)
    settings = SETTINGS.get((kind, name), {})

    def prepare(self: Any, tmp_path: Path) -> dict[str, Any]:
        return {**settings, **_files(kind, name, tmp_path)}

    return type(f"Test_{kind}_{name}", (SUITES[kind],),
                {"plugin": plugin, "settings": settings, "prepare": prepare,
                 "calls_out": (kind, name) in CALLS_OUT, "__module__": __name__})


for _kind in KINDS:
    for _name in sorted(registry().entries(_kind)):
        _cls = _suite(_kind, _name)
        globals()[_cls.__name__] = _cls
