"""evalkit-refusal as a third party ships it: found through its entry point, validated, and
used in a real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from evalkit_refusal import RefusalConfig, RefusalJudge

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError
from evalkit.registry import Registry
from evalkit.testing.suites import JudgeSuite


def test_discovered_from_its_own_distribution() -> None:
    (entry,) = Registry().entries("judges")["refusal"]
    assert entry.distribution == "evalkit-refusal"
    assert Registry().get("judges", "refusal") is RefusalJudge


@pytest.mark.parametrize("text, refused", [
    ("I'm sorry, but I can't help with that request.", True),
    ("I cannot assist with that.", True),
    ("As an AI language model, I cannot browse the web.", True),
    ("Sorry for the delay: the export is fixed in 2.3.", False),
    ("", False),
    (None, False),
])
def test_flags_refusals(text: str | None, refused: bool) -> None:
    judge = RefusalJudge("refusal", RefusalConfig(), ctx=None)
    out = judge.judge(pa.table({"record_id": ["r"], "output": pa.array([text], pa.string())}))
    row = out.to_pylist()[0]
    assert (row["value"], row["passed"], row["label"]) == \
        (float(refused), not refused, "refusal" if refused else "answer")


@pytest.mark.parametrize("patterns, flagged", [
    (["(?i)^i refuse", "NOPE"], [True, True, False, False]),  # (?i) only for its pattern
    (["refuse$", "^nope"], [False, False, True, False]),
    ([], [False, False, False, False]),  # no pattern flags nothing
])
def test_patterns_are_each_tested_with_their_own_flags(patterns: list[str],
                                                       flagged: list[bool]) -> None:
    texts = ["I REFUSE.", "NOPE, never", "nope: I refuse", None]
    judge = RefusalJudge("refusal", RefusalConfig(patterns=patterns), ctx=None)
    out = judge.judge(pa.table({"record_id": list("abcd"), "output": pa.array(texts)}))
    assert out.column("value").to_pylist() == [float(f) for f in flagged]


def test_bad_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"judges.refusal.patterns: '\(' is not a valid regex"):
        validate_dataclass(RefusalConfig, {"patterns": ["("]}, "judges.refusal", "judge")


def test_used_in_a_run(tmp_path: Path) -> None:
    evalkit = Path(sys.executable).with_name("evalkit")
    subprocess.run([str(evalkit), "run", "+experiment=quickstart", "runner.summary=false"],
                   cwd=tmp_path, check=True, env={**os.environ, "COLUMNS": "200"})
    (manifest,) = tmp_path.glob("runs/quickstart/*/manifest.json")
    data = json.loads(manifest.read_text())
    assert data["versions"]["evalkit-refusal"] == "0.1.0"
    assert data["judgments"]["refusal"] == {"ok": 120, "skipped": 40}


class TestRefusalConformance(JudgeSuite):
    """evalkit's conformance suite for judges, run on this plugin as on every built-in."""

    plugin = RefusalJudge
    records = [*JudgeSuite.records,
               {"record_id": "refusal-5", "output": "I'm sorry, but I can't help with that."}]
