"""The conformance suites catch the faults they are there for: each broken plugin below fails
the check named beside it (and a sound one passes it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from evalkit.plugin import Filter, Judge, Metric, Reject, Source
from evalkit.testing.suites import FilterSuite, JudgeSuite, MetricSuite, SourceSuite


@dataclass(frozen=True)
class Nothing:
    pass


class Sound(Judge):
    Config = Nothing
    thread_safe = True

    def wanted_columns(self):
        return ["output"]

    def judge(self, records):
        n = pc.utf8_length(pc.fill_null(records.column("output"), ""))
        return pa.table({"record_id": records.column("record_id"),
                         "value": pc.cast(n, pa.float64()),
                         "status": pa.repeat(pa.scalar("ok"), records.num_rows)})


class FirstOnly(Sound):
    def judge(self, records):
        return super().judge(records).slice(0, 1)


class BatchDependent(Sound):
    def judge(self, records):
        out = super().judge(records)
        return out.set_column(1, "value", pa.repeat(pa.scalar(float(records.num_rows)),
                                                    records.num_rows))


class ScoredError(Sound):
    def judge(self, records):
        out = super().judge(records)
        return out.set_column(2, "status", pa.repeat(pa.scalar("error"), records.num_rows))


class ReadsUnnamed(Sound):
    def judge(self, records):
        records.column("input")  # not among wanted_columns()
        return super().judge(records)


class BadColumn(Sound):
    def wanted_columns(self):
        return ["outptu"]


@pytest.mark.parametrize("judge, check", [
    (FirstOnly, "test_one_judgment_per_record_given"),
    (BatchDependent, "test_each_record_is_judged_on_its_own"),
    (ScoredError, "test_one_judgment_per_record_given"),
    (ReadsUnnamed, "test_one_judgment_per_record_given"),
    (BadColumn, "test_named_columns_are_record_columns"),
])
def test_judge_suite_fails_a_broken_judge(judge, check, tmp_path: Path):
    suite = type("S", (JudgeSuite,), {"plugin": judge})()
    with pytest.raises((AssertionError, KeyError)):
        getattr(suite, check)(tmp_path)
    sound = type("S", (JudgeSuite,), {"plugin": Sound})()
    getattr(sound, check)(tmp_path)


class OneMark(Filter):
    Config = Nothing

    def mark(self, batch):
        return ["why"]


def test_filter_suite_fails_a_filter_with_too_few_marks(tmp_path: Path):
    suite = type("S", (FilterSuite,), {"plugin": OneMark})()
    with pytest.raises(AssertionError):
        suite.test_one_mark_per_row(tmp_path)


class NoSlice(Metric):
    Config = Nothing

    def compute(self, con):
        return [{"value": 1.0}]


def test_metric_suite_fails_rows_without_a_slice(tmp_path: Path):
    suite = type("S", (MetricSuite,), {"plugin": NoSlice})()
    with pytest.raises(AssertionError):
        suite.test_rows_fit_the_metrics_schema(tmp_path)


@dataclass(frozen=True)
class PathConfig:
    path: str = "???"


class Unstable(Source):
    """Ids that change from one read to the next (a counter), and a record twice."""

    Config = PathConfig
    reads = 0

    def read(self):
        Unstable.reads += 1
        rows = json.loads(Path(self.config.path).read_text())
        yield Reject("x:1", "bad line")
        yield pa.table({"record_id": [f"{r}-{Unstable.reads}" for r in rows]})


class Twice(Unstable):
    def read(self):
        yield pa.table({"record_id": ["a", "a"]})


@pytest.mark.parametrize("source", [Unstable, Twice])
def test_source_suite_fails_unstable_or_repeated_ids(source, tmp_path: Path):
    def prepare(self, tmp_path):
        path = tmp_path / "rows.json"
        path.write_text(json.dumps(["a", "b"]))
        return {"path": str(path)}

    suite = type("S", (SourceSuite,), {"plugin": source, "prepare": prepare})()
    with pytest.raises(AssertionError):
        suite.test_yields_records_rejects_and_scores_only(tmp_path)


class Stable(Source):
    """Reads ``path``; cuts ``source.shard=i/n`` itself, by position."""

    Config = PathConfig
    cut: tuple[int, int] | None = None

    def shard(self, index, count):
        self.cut = (index, count)
        return True

    def read(self):
        rows = json.loads(Path(self.config.path).read_text())
        i, n = self.cut or (0, 1)
        yield pa.table({"record_id": [r for k, r in enumerate(rows) if k % n == i]})


class Overlapping(Stable):
    """Says it cuts its shard, but shard 1 also yields shard 0's first record."""

    def read(self):
        yield from super().read()
        if self.cut and self.cut[0] == 1:
            yield pa.table({"record_id": ["r0"]})


class Losing(Stable):
    """Says it cuts its shard, but the last shard yields nothing."""

    def read(self):
        if self.cut is None or self.cut[0] != self.cut[1] - 1:
            yield from super().read()


@pytest.mark.parametrize("source", [Stable, Overlapping, Losing])
def test_source_suite_fails_shards_that_overlap_or_lose_records(source, tmp_path: Path):
    def prepare(self, tmp_path):
        path = tmp_path / "rows.json"
        path.write_text(json.dumps([f"r{k}" for k in range(10)]))
        return {"path": str(path)}

    suite = type("S", (SourceSuite,), {"plugin": source, "prepare": prepare})()
    check = suite.test_shards_it_cuts_itself_are_the_read_each_record_once
    if source is Stable:
        check(tmp_path)
    else:
        with pytest.raises(AssertionError, match="two shards|not the whole read"):
            check(tmp_path)
