"""`evalkit init FILE` on the values real logs hold beside their shapes: answers that are
numbers written as text ("18"), flags written as "yes"/"no", "Y"/"N" or 1/0, timestamps and
numbers the source cannot read as they are ("01/11/2026 10:00", "812ms"), and a chat
completion that is a tool call (content null). Each is mapped so that a run counts it right,
or named with the reason; none becomes a wrong count without a word."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit.commands import init
from evalkit.commands.init_mapping import io_text, propose, sample_rows
from tests.commands.log_shapes import jsonl

N = 12


def _gsm_rows() -> list[dict[str, Any]]:
    """A maths QA log: the answers and the references are numbers written as JSON text."""
    return [{"id": f"q{i}", "question": f"What is {i} times 3?", "answer": str(3 * i),
             "expected": str(3 * i + (1 if i % 4 == 0 else 0)), "model": "m1"}
            for i in range(1, N + 1)]


def _csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _init_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                  text: str) -> evalkit.Run:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    init.main(argparse.Namespace(what=[name], name="starter", dir=".", field=[], force=False))
    return evalkit.run("starter")


def _metric(run: evalkit.Run, metric: str) -> float:
    (value,) = [r["value"] for r in run.metrics.to_pylist()
                if (r["metric"], r["slice"]) == (metric, "all")]
    return value


@pytest.mark.parametrize("name", ["gsm.jsonl", "gsm.csv"])
def test_answers_that_are_numbers_in_text_are_the_output_and_the_reference(tmp_path, name):
    """JSON text "18" is text; a CSV cell is always text: both are an answer, not a count."""
    path = tmp_path / name
    path.write_text(jsonl(_gsm_rows()) if name.endswith("jsonl") else _csv(_gsm_rows()))
    found = propose(sample_rows(path)).proposals
    assert found["output"].path == "answer"
    assert found["reference"].path == "expected"
    assert found["input"].path == "question"


@pytest.mark.e2e
def test_numeric_answers_scored_by_exact_match(tmp_path, monkeypatch):
    run = _init_and_run(tmp_path, monkeypatch, "gsm.jsonl", jsonl(_gsm_rows()))
    right = sum(r["answer"] == r["expected"] for r in _gsm_rows())
    assert run.manifest["n_records"] == N
    assert _metric(run, "exact_match_rate") == pytest.approx(right / N)
