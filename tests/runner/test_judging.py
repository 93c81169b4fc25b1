"""Judging a batch on a thread while the run reads, filters and writes the next (every judge
``thread_safe``, the source parsing on worker processes): the same judgments in the same
order as judging in line, a judge's failure still fails the run, and a judge that is not
thread-safe or a source that parses on the run's thread keeps them all in line."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from evalkit.config import load
from evalkit.errors import EvalkitError
from evalkit.plugin import Judge
from evalkit.runner import judging as runner_judging
from evalkit.runner.judging import JudgeRunner, Judging
from evalkit.runner.pipeline import execute


class _Safe:
    thread_safe = True


class _Unsafe:
    thread_safe = False  # (the default of evalkit.plugin.Judge)


SAFE = _Safe()


class _Runner:
    """Stands in for the judge runner: one part per batch, naming the thread it ran on."""

    def __init__(self, plugin: Any = SAFE, fail_on: int | None = None) -> None:
        self.judges = [(None, plugin)]
        self.dry_run = False
        self.fail_on = fail_on
        self.threads: list[str] = []

    def run(self, records: pa.Table) -> list[pa.Table]:
        self.threads.append(threading.current_thread().name)
        batch = records.column("b")[0].as_py()
        if batch == self.fail_on:
            raise EvalkitError(f"judge failed on batch {batch}")
        return [pa.table({"computed": [batch]})]


class _Source:
    def __init__(self, beside: bool = True) -> None:
        self.parses_beside = beside


class _Writer:
    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []

    def add_judgments(self, table: pa.Table) -> None:
        self.parts.append(table.to_pylist()[0])

    def end_batch(self, ids: pa.ChunkedArray) -> None:  # a batch's parts are all written
        self.parts.append({"done": ids.to_pylist()})


def _batch(b: int) -> pa.Table:
    return pa.table({"record_id": [f"r{b}"], "b": [b]})


def _judge_batches(runner: _Runner, n: int, source: _Source | None = None
                   ) -> tuple[Judging, _Writer]:
    writer = _Writer()
    judging = Judging(runner, writer, source or _Source())  # type: ignore[arg-type]
    for b in range(n):
        judging.submit(_batch(b), [pa.table({"imported": [b]})])
    judging.finish()
    judging.close()
    return judging, writer


def test_parts_are_written_in_batch_order_computed_then_imported_then_the_batch_noted(monkeypatch):
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 2)
    runner = _Runner()
    _, writer = _judge_batches(runner, 4)
    assert writer.parts == [p for b in range(4)
                            for p in ({"computed": b}, {"imported": b}, {"done": [f"r{b}"]})]
    assert runner.threads == ["evalkit-judges_0"] * 4
    assert not [t for t in threading.enumerate() if t.name.startswith("evalkit-judges")]
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 1)  # one core: judged in line
    inline = _Runner()
    _, same = _judge_batches(inline, 4)
    assert same.parts == writer.parts and inline.threads == ["MainThread"] * 4


def test_an_unsafe_judge_or_a_source_parsing_in_line_keeps_judges_in_line(monkeypatch):
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 2)
    runner = _Runner(_Unsafe())  # (an LLM judge, state_check's database connection...)
    _judge_batches(runner, 2)
    assert runner.threads == ["MainThread"] * 2
    in_process = _Runner()  # a source that parses on the run's thread
    _judge_batches(in_process, 2, _Source(beside=False))
    assert in_process.threads == ["MainThread"] * 2


def test_a_judge_error_is_raised_and_nothing_after_it_is_written(monkeypatch):
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 2)
    writer = _Writer()
    judging = Judging(_Runner(fail_on=1), writer, _Source())  # type: ignore[arg-type]
    judging.submit(_batch(0), [])
    judging.submit(_batch(1), [])
    with pytest.raises(EvalkitError, match="batch 1"):
        judging.submit(_batch(2), [])
    judging.close()
    assert writer.parts == [{"computed": 0}, {"done": ["r0"]}]


def _run(tmp_path: Path, data: Path, name: str) -> Path:
    cfg = OmegaConf.create({
        "experiment": name,
        "source": {"plugin": "jsonl", "path": str(data), "record_id": "id",
                   "batch_size": 7, "workers": 2, "scores": {"H": "h"}},
        "filters": {"pipeline_failure": {"plugin": "pipeline_failure"}},
        "judges": {"prompt_echo": {"plugin": "prompt_echo"},
                   "refusal": {"plugin": "refusal"}},
        "metrics": {"echo_rate": {"plugin": "rate", "judge": "prompt_echo"}},
        "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False},
    })
    return execute(load(cfg)).run_dir


def test_a_run_judged_on_the_thread_writes_what_one_judged_in_line_writes(tmp_path,
                                                                         monkeypatch):
    rows = [{"id": f"r{i}", "model": "m", "h": i / 40,
             "level": "ERROR" if i % 9 == 0 else "DEFAULT", "input": f"Copy this {i} text.",
             "output": f"copy this {i} text" if i % 3 else "I'm sorry, but I can't help."}
            for i in range(40)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen: list[str] = []
    judge = runner_judging.JudgeRunner.run

    def run(self: Any, records: pa.Table) -> list[pa.Table]:
        seen.append(threading.current_thread().name)
        return judge(self, records)

    monkeypatch.setattr(runner_judging.JudgeRunner, "run", run)
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 2)
    threaded = _run(tmp_path, data, "threaded")
    assert set(seen) == {"evalkit-judges_0"} and len(seen) == 6
    monkeypatch.setattr(runner_judging.os, "cpu_count", lambda: 1)
    inline = _run(tmp_path, data, "inline")
    assert seen[6:] == ["MainThread"] * 6

    def table(run_dir: Path, name: str) -> list[dict[str, Any]]:
        parts = sorted((run_dir / name).glob("part-*.parquet")) if name == "judgments" \
            else [run_dir / f"{name}.parquet"]
        return [{k: v for k, v in row.items() if k != "run_id"}
                for p in parts for row in pq.read_table(p).to_pylist()]

    for name in ("records", "judgments", "metrics"):
        assert table(threaded, name) == table(inline, name), name
    assert len(table(threaded, "judgments")) == 40 * 2 + 40


class _Seeing(Judge):
    """A judge that notes the columns of each batch it gets."""

    def __init__(self, columns: list[str] | None = None, excluded_too: bool = False) -> None:
        self.columns = columns
        self.applies_to_excluded = excluded_too  # type: ignore[misc]
        self.seen: list[list[str]] = []

    def wanted_columns(self) -> list[str] | None:
        return self.columns

    def judge(self, batch: pa.Table) -> pa.Table:
        self.seen.append(batch.column_names)
        return pa.table({"record_id": batch.column("record_id"),
                         "status": pa.repeat(pa.scalar("ok"), batch.num_rows)})


def _records() -> pa.Table:
    from evalkit.results.schemas import RECORDS, conform

    return conform([{"record_id": "a", "output": "x", "input": "p", "model": "m"},
                    {"record_id": "b", "output": "y", "excluded_by": "f",
                     "exclude_reason": "why"}], RECORDS, {"run_id": "r"})


def _inst(name: str) -> Any:
    return type("Inst", (), {"name": name, "plugin": name})()


def test_judges_that_name_their_columns_get_those_columns_only():
    """When every judge says which record columns it reads, the included records they get
    hold those columns (and record_id, in the records' order) only; one judge that does not
    say gives every judge every column. The judgments are the same either way."""
    narrow, other = _Seeing(["output"]), _Seeing(["input", "output"], excluded_too=True)
    runner = JudgeRunner([(_inst("n"), narrow), (_inst("o"), other)], "r", False)
    parts = runner.run(_records())
    assert narrow.seen == other.seen == [["record_id", "input", "output"]]
    wide = _Seeing()
    all_parts = JudgeRunner([(_inst("n"), _Seeing(["output"])),
                              (_inst("o"), _Seeing(["input"], excluded_too=True)),
                              (_inst("w"), wide)], "r", False).run(_records())
    assert wide.seen == [_records().column_names]
    assert [p.to_pylist() for p in parts] == [p.to_pylist() for p in all_parts[:2]]
    # the judge of excluded records too saw both; the other judged one, skipped one
    assert [[r["status"] for r in p.to_pylist()] for p in parts] == [["ok", "skipped"],
                                                                     ["ok", "ok"]]


def test_a_judge_naming_a_column_records_lack_fails_before_the_run():
    with pytest.raises(EvalkitError, match=r"\['outptu'\], which are not record columns"):
        JudgeRunner([(_inst("n"), _Seeing(["outptu"]))], "r", False)
