"""The judged table of ``rate`` and ``mean``: a run writes each judge's judgments in record
order, one per record, so they are lined up with the records by position; any other layout
(another order, a record judged twice or not at all) is joined on record_id. Both give the
rows of the join, in record order."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.metrics import _judged
from evalkit.metrics._signals import judgment_join, per_record
from evalkit.results.writer import run_connection
from evalkit.runner.pipeline import execute
from tests.metrics.run_tables import run_dir_connection


def _joined(con: Any, judge: str, slice_by: list[str]) -> pa.Table:
    """The judged table by the join on record_id (what the positional path must equal)."""
    cols = ", ".join(f'r."{c}"' for c in dict.fromkeys(["excluded_by", *slice_by]))

    def query(pick: bool) -> tuple[str, list[Any]]:
        join, params = judgment_join(con, judge, ["value", "passed", "label"], "j", pick)
        return (f"SELECT {cols}, j.value, j.passed, j.label, j.status FROM records r {join} "
                "ORDER BY r.record_id"), params

    return per_record(con, query)


def _by_id(con: Any, table: pa.Table) -> pa.Table:
    """``table``, in records' order, sorted by record_id, to compare with :func:`_joined`."""
    ids = con.execute("SELECT record_id FROM records").to_arrow_table().column(0)
    return table.append_column("record_id", ids).sort_by("record_id").drop_columns(
        ["record_id"])


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as a sorted list (for tables whose order the join decides)."""
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    rows = [{"id": f"r{i:03d}", "model": f"m{i % 3}",
             "level": "ERROR" if i % 7 == 0 else "DEFAULT", "input": f"Copy this {i} text.",
             "output": f"copy this {i} text" if i % 3 else "I'm sorry, but I can't help."}
            for i in range(60)]
    random.Random(2).shuffle(rows)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = OmegaConf.create({
        "experiment": "positions",
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id", "batch_size": 8,
                   "workers": 0},
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": {"prompt_echo": {"plugin": "prompt_echo"}, "refusal": {"plugin": "refusal"},
                   "all_of_them": {"plugin": "pipeline_failure"}},
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False},
    })
    return execute(load(cfg)).run_dir


def test_a_run_writes_each_judges_judgments_in_record_order(run_dir: Path):
    records = pq.read_table(run_dir / "records.parquet").column("record_id").to_pylist()
    parts = sorted((run_dir / "judgments").glob("part-*.parquet"))
    judgments = pa.concat_tables([pq.read_table(p) for p in parts])
    for judge in ("prompt_echo", "refusal", "all_of_them"):
        mine = judgments.filter(pa.compute.equal(judgments.column("judge"), judge))
        assert mine.column("record_id").to_pylist() == records, judge
    skipped = judgments.filter(pa.compute.equal(judgments.column("status"), "skipped"))
    assert 0 < skipped.num_rows < judgments.num_rows
    assert len(parts) == 3 * 8  # one part per judge and batch: skipped and judged together


def test_lined_up_judgments_give_the_joined_rows(run_dir: Path, monkeypatch):
    con = run_connection(run_dir)
    joins = []
    monkeypatch.setattr(_judged, "per_record", lambda *a: joins.append(1) or per_record(*a))
    for judge in ("prompt_echo", "refusal"):
        table = _judged._load(con, judge, ["model"])
        assert _by_id(con, table).equals(_joined(con, judge, ["model"]))
    assert joins == []  # by position, never joined


@pytest.mark.parametrize("layout", ["shuffled", "twice", "missing", "other judge between"])
def test_other_layouts_are_joined_on_record_id(tmp_path: Path, layout: str, monkeypatch):
    records = [{"record_id": f"r{i}", "model": f"m{i % 2}", "run_id": "x",
                "excluded_by": "f" if i % 4 == 0 else None} for i in range(12)]
    judgments = [{"record_id": f"r{i}", "judge": "J", "value": i / 12, "passed": i % 3 > 0,
                  "status": "ok", "origin": "computed", "run_id": "x"} for i in range(12)]
    if layout == "shuffled":
        judgments = judgments[1:] + judgments[:1]
    elif layout == "twice":
        judgments.insert(5, {**judgments[5], "status": "error", "value": None})
    elif layout == "missing":
        del judgments[7]
    else:
        judgments.insert(3, {**judgments[3], "judge": "K"})
    con = run_dir_connection(tmp_path, records, judgments)
    joins = []
    monkeypatch.setattr(_judged, "per_record", lambda *a: joins.append(1) or per_record(*a))
    table = _judged._load(con, "J", ["model"])
    assert _rows(table) == _rows(_joined(con, "J", ["model"]))
    assert joins == ([] if layout == "other judge between" else [1])
