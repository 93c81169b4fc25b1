"""Conformance suites: pytest test classes that check a plugin the way the runner will use it.
A plugin author subclasses the suite of the plugin's kind in their own tests and names the
plugin (as Hydra's ``LauncherTestSuite``)::

    from evalkit.testing.suites import JudgeSuite
    from my_plugin import MyJudge

    class TestMyJudge(JudgeSuite):
        plugin = MyJudge
        settings = {"threshold": 0.5}  # the Config's fields, when the defaults will not do

Every suite checks the contract (:func:`evalkit.plugin.check_plugin`) and that ``settings``
make a valid ``Config``; the judge, filter and metric suites then run the plugin on sample
records (:data:`SAMPLE_RECORDS`, or the subclass's ``records``) and check what it returns.
Running them needs pytest (the suites are plain classes that pytest collects)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.context import RunContext
from evalkit.plugin import (
    JUDGMENTS,
    METRICS,
    RECORDS,
    AsyncJudge,
    ImportedScores,
    Judge,
    Reject,
    Sink,
    check_plugin,
    conform,
)

__all__ = ["SAMPLE_JUDGMENTS", "SAMPLE_RECORDS", "SUITES", "FilterSuite", "GeneratorSuite",
           "JudgeSuite", "MetricSuite", "SinkSuite", "SourceSuite", "sample_context"]

SAMPLE_RECORDS: list[dict[str, Any]] = [
    {"record_id": "ok-1", "model": "m1", "level": "DEFAULT", "input": "What is 2 + 2?",
     "output": "2 + 2 is 4.", "reference": "4", "context": ["Arithmetic: 2 + 2 = 4. [1]"],
     "latency_s": 0.5, "cost_usd": 0.001, "input_tokens": 10, "output_tokens": 5,
     "confidence": 0.9, "outcome": "success", "user_action": "accepted",
     "final_output": "2 + 2 is 4.", "human_label": "pass", "tags": ["math"],
     "metadata": json.dumps({"team": "a", "relevance": [1]})},
    {"record_id": "echo-2", "model": "m2", "level": "DEFAULT",
     "input": "Summarise the report in one line.", "output": "Summarise the report in one line.",
     "reference": "The report says sales rose.", "context": [], "latency_s": 1.5,
     "cost_usd": 0.002, "outcome": "failure", "user_action": "edited",
     "final_output": "Sales rose.", "human_label": "fail",
     "metadata": json.dumps({"team": "b", "relevance": []})},
    {"record_id": "failed-3", "model": "m1", "level": "ERROR", "status_message": "HTTP 500",
     "input": "hi", "output": None, "latency_s": 0.1, "outcome": None,
     "excluded_by": "pipeline_failure", "exclude_reason": "level=ERROR: HTTP 500"},
    {"record_id": "json-4", "model": "m2", "level": "DEFAULT", "input": '[{"role": "user", '
     '"content": "Give JSON"}]', "output": '{"answer": 42}', "reference": '{"answer": 42}',
     "context": ['{"tool": "run", "success": true, "exit_code": 1, "stderr": "boom"}'],
     "latency_s": 0.7, "outcome": "success", "user_action": "bypassed", "tags": []},
]
"""Records of every shape the runner hands a plugin: a plain answer, an echo of the prompt, a
failed call a filter set aside (``excluded_by``), chat JSON with a tool result."""

SAMPLE_JUDGMENTS: list[dict[str, Any]] = [
    {"record_id": r["record_id"], "judge": "sample", "plugin": "sample", "status": s,
     "value": v, "passed": None if v is None else v < 0.5,
     "label": None if v is None else ("low" if v < 0.5 else "high")}
    for r, (s, v) in zip(SAMPLE_RECORDS, [("ok", 0.2), ("ok", 0.9), ("skipped", None),
                                          ("error", None)], strict=True)
]
"""Judgments of a judge named ``sample`` on :data:`SAMPLE_RECORDS`, for metric suites."""


def sample_context(tmp_path: Path) -> RunContext:
    """A run context whose directories are under ``tmp_path``."""
    return RunContext(run_id="conformance", experiment="conformance",
                      run_dir=tmp_path / "runs" / "conformance" / "run",
                      runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")


class _Suite:
    """What every suite checks: the contract, and that the settings make a valid ``Config``.
    ``calls_out = True`` skips the checks that run the plugin, for one that needs a service
    the test has no stand-in for (its contract and config are still checked)."""

    kind: ClassVar[str]
    plugin: ClassVar[type]  # the plugin class under test
    settings: ClassVar[dict[str, Any]] = {}  # its Config's fields, where defaults will not do
    calls_out: ClassVar[bool] = False

    def prepare(self, tmp_path: Path) -> dict[str, Any]:
        """The settings of the plugin under test; override to write what they point to (an
        input file, a database) under ``tmp_path`` first."""
        return dict(self.settings)

    def config(self, tmp_path: Path) -> Any:
        return self.plugin.Config(**self.prepare(tmp_path))

    def make(self, tmp_path: Path) -> Any:
        """The plugin, built as the runner builds it."""
        return self.plugin("under_test", self.config(tmp_path), sample_context(tmp_path))

    def _skip_if_it_calls_out(self) -> None:
        if self.calls_out:
            import pytest

            pytest.skip(f"{self.plugin.__name__} calls a service (calls_out = True)")

    def test_honours_its_contract(self) -> None:
        problem = check_plugin(self.kind, self.plugin)
        assert problem is None, f"{self.plugin.__name__} {problem}"

    def test_settings_make_a_valid_config(self, tmp_path: Path) -> None:
        config = self.config(tmp_path)
        validate = getattr(config, "validate", None)  # (optional on a Config)
        if validate is not None:
            validate()


def _on_a_thread(work: Callable[[], Any]) -> Any:
    """What ``work`` returns when run on another thread (what it raises, raised here)."""
    out: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return out[0]


def _records(rows: list[dict[str, Any]]) -> pa.Table:
    return conform([{"run_id": "conformance", **r} for r in rows], RECORDS)


class JudgeSuite(_Suite):
    """A judge returns exactly one judgment per record it is given, of the judgments schema,
    never a score with ``status='error'``; it reads only the columns it names; a
    ``thread_safe`` judge gives the same on another thread; ``estimate`` answers without
    calling anything. An :class:`~evalkit.plugin.AsyncJudge` is awaited as the runner
    awaits it."""

    kind = "judges"
    records: ClassVar[list[dict[str, Any]]] = SAMPLE_RECORDS

    def _given(self, judge: Judge) -> pa.Table:
        """The records as the runner hands them: the included ones (all of them for a judge
        that ``applies_to_excluded``), only the columns the judge names."""
        table = _records(self.records)
        if not judge.applies_to_excluded:
            table = table.filter(pc.is_null(table.column("excluded_by")))
        wanted = judge.wanted_columns()
        if wanted is not None:
            table = table.select([c for c in RECORDS.names if c in {"record_id", *wanted}])
        return table

    def _judge(self, judge: Judge, table: pa.Table) -> pa.Table:
        import asyncio

        result = asyncio.run(judge.ajudge(table)) if isinstance(judge, AsyncJudge) \
            else judge.judge(table)
        return conform(result, JUDGMENTS)

    def test_named_columns_are_record_columns(self, tmp_path: Path) -> None:
        wanted = self.make(tmp_path).wanted_columns()
        if wanted is not None:
            assert set(wanted) <= set(RECORDS.names), set(wanted) - set(RECORDS.names)

    def test_one_judgment_per_record_given(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        judge = self.make(tmp_path)
        try:
            given = self._given(judge)
            got = self._judge(judge, given)
        finally:
            judge.close()
        assert sorted(got.column("record_id").to_pylist()) == \
            sorted(given.column("record_id").to_pylist())
        assert set(got.column("status").to_pylist()) <= {"ok", "error", "skipped"}
        errors = pc.equal(got.column("status"), "error")
        assert not pc.any(pc.and_(errors, pc.is_valid(got.column("value")))).as_py(), \
            "an error judgment holds a value: a record the judge could not score has none"

    def test_each_record_is_judged_on_its_own(self, tmp_path: Path) -> None:
        """A record's judgment does not depend on the others of its batch (the runner cuts
        the input into batches wherever it likes)."""
        self._skip_if_it_calls_out()
        judge = self.make(tmp_path)
        try:
            given = self._given(judge)
            whole = self._judge(judge, given).sort_by("record_id")
            alone = pa.concat_tables([self._judge(judge, given.slice(i, 1))
                                      for i in range(given.num_rows)]).sort_by("record_id")
        finally:
            judge.close()
        keep = ["record_id", "value", "passed", "label", "status"]
        assert whole.select(keep).equals(alone.select(keep))

    def test_thread_safe_judge_judges_alike_on_another_thread(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        judge = self.make(tmp_path)
        if not judge.thread_safe:
            return
        given = self._given(judge)
        here = self._judge(judge, given)
        there = _on_a_thread(lambda: self._judge(judge, given))
        judge.close()
        assert there.equals(here)

    def test_estimate_says_the_calls(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        judge = self.make(tmp_path)
        try:
            estimate = judge.estimate(self._given(judge))
        finally:
            judge.close()
        assert "calls" in estimate and (estimate["calls"] or 0) >= 0


class FilterSuite(_Suite):
    """A filter gives one reason (text) or null per row of the batch it is given."""

    kind = "filters"
    records: ClassVar[list[dict[str, Any]]] = SAMPLE_RECORDS

    def test_one_mark_per_row(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        batch = _records(self.records).combine_chunks().to_batches()[0]
        marks = self.make(tmp_path).mark(batch)
        marks = marks if isinstance(marks, pa.Array) else pa.array(marks, pa.string())
        assert len(marks) == batch.num_rows
        assert pa.types.is_string(marks.type) or pa.types.is_large_string(marks.type) or \
            marks.null_count == len(marks)

    def test_a_row_is_marked_alike_in_any_batch(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        table = _records(self.records).combine_chunks()
        whole = self.make(tmp_path).mark(table.to_batches()[0])
        alone = [self.make(tmp_path).mark(table.slice(i, 1).to_batches()[0])
                 for i in range(table.num_rows)]
        as_list = (whole.to_pylist() if isinstance(whole, pa.Array) else list(whole))
        singles = [(m.to_pylist() if isinstance(m, pa.Array) else list(m))[0] for m in alone]
        assert as_list == singles


class MetricSuite(_Suite):
    """A metric computes rows of the metrics schema from a run's ``records``,
    ``judgments`` and ``included`` views, on a cursor of its own when ``thread_safe``."""

    kind = "metrics"
    records: ClassVar[list[dict[str, Any]]] = SAMPLE_RECORDS
    judgments: ClassVar[list[dict[str, Any]]] = SAMPLE_JUDGMENTS

    def _connection(self) -> Any:
        import duckdb

        con = duckdb.connect()
        tables = {"records": _records(self.records), "judgments": conform(
            [{"run_id": "conformance", "origin": "computed", **j} for j in self.judgments],
            JUDGMENTS)}
        for name, table in tables.items():  # (tables, not registered Arrow: cursors see them)
            con.register(f"{name}_arrow", table)
            con.execute(f"CREATE TABLE {name}_t AS SELECT * FROM {name}_arrow")
            con.unregister(f"{name}_arrow")
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {name}_t")
        con.execute("CREATE VIEW included AS SELECT * FROM records WHERE excluded_by IS NULL")
        return con

    def test_rows_fit_the_metrics_schema(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        con = self._connection()
        try:
            rows = conform(self.make(tmp_path).compute(con), METRICS,
                           {"run_id": "conformance", "plugin": "p", "metric": "m"})
        finally:
            con.close()
        assert rows.num_rows >= 1
        assert rows.column("slice").null_count == 0, "every row names its slice ('all', ...)"

    def test_thread_safe_metric_computes_alike_on_a_cursor(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        metric = self.make(tmp_path)
        if not metric.thread_safe:
            return
        con = self._connection()
        try:
            here = conform(metric.compute(con), METRICS)
            cursor = con.cursor()
            there = _on_a_thread(lambda: conform(self.make(tmp_path).compute(cursor), METRICS))
            cursor.close()
        finally:
            con.close()
        assert there.equals(here)


class SourceSuite(_Suite):
    """A source yields record batches, :class:`~evalkit.plugin.Reject` and
    :class:`~evalkit.plugin.ImportedScores` only; its batches fit the records schema; every
    record has an id, unique, and the same on a second read; its fingerprint is JSON.
    Subclasses give the input: override :meth:`prepare` to write files under
    ``tmp_path`` and return the settings that read them."""

    kind = "sources"

    def _read(self, tmp_path: Path) -> Iterator[Any]:
        yield from self.make(tmp_path).read()

    def test_yields_records_rejects_and_scores_only(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        ids: list[str] = []
        for item in self._read(tmp_path):
            if isinstance(item, (Reject, ImportedScores)):
                continue
            assert isinstance(item, (pa.Table, pa.RecordBatch)), type(item)
            table = conform(item, RECORDS, {"run_id": "conformance"})
            assert table.column("record_id").null_count == 0, "a record without an id"
            ids += table.column("record_id").to_pylist()
        assert ids, "the sample input gave no record"
        assert len(ids) == len(set(ids)), "a record id twice"
        again = [r for item in self._read(tmp_path) if isinstance(item, (pa.Table,
                                                                         pa.RecordBatch))
                 for r in conform(item, RECORDS, {"run_id": "x"}).column("record_id")
                 .to_pylist()]
        assert again == ids, "record ids change from one read to the next"

    def test_fingerprint_is_json(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        json.dumps(self.make(tmp_path).fingerprint())

    def test_shards_it_cuts_itself_are_the_read_each_record_once(self, tmp_path: Path
                                                                  ) -> None:
        """A source whose :meth:`~evalkit.plugin.Source.shard` takes the cut: its shards'
        records are the whole read's, each in one shard."""
        self._skip_if_it_calls_out()
        n = 3
        shards: list[list[str]] = []
        for i in range(n):
            source = self.make(tmp_path)
            if not source.shard(i, n):
                return  # the runner cuts: by record id, the same for every source
            shards.append([r for item in source.read() if isinstance(item, (pa.Table,
                                                                               pa.RecordBatch))
                           for r in conform(item, RECORDS, {"run_id": "x"}).column("record_id")
                           .to_pylist()])
        whole = [r for item in self._read(tmp_path) if isinstance(item, (pa.Table,
                                                                          pa.RecordBatch))
                 for r in conform(item, RECORDS, {"run_id": "x"}).column("record_id").to_pylist()]
        got = [r for ids in shards for r in ids]
        assert len(got) == len(set(got)), "a record in two shards"
        assert set(got) == set(whole), "the shards are not the whole read"


class SinkSuite(_Suite):
    """A sink honours its contract and its settings make a valid Config (pushing needs the
    service it sends to: test that against a stand-in of your own)."""

    kind = "sinks"

    def make(self, tmp_path: Path) -> Sink:
        return self.plugin("under_test", self.config(tmp_path), None)


class GeneratorSuite(_Suite):
    """A generator returns one candidate per record it is given (its record id, an output
    that is text or null with an ``error``), whatever the batch holds, and its dry-run
    estimate counts calls without making any."""

    kind = "generators"

    def _generate(self, generator: Any, table: pa.Table) -> list[dict[str, Any]]:
        import asyncio

        try:
            return asyncio.run(generator.agenerate(table))
        finally:
            generator.close()

    def test_one_candidate_per_record_given(self, tmp_path: Path) -> None:
        self._skip_if_it_calls_out()
        table = _records(self.records)
        for given in (table, table.slice(1, 2), table.slice(0, 0)):
            rows = self._generate(self.make(tmp_path), given)
            ids = given.column("record_id").to_pylist()
            assert sorted(r["record_id"] for r in rows) == sorted(ids), \
                f"{self.plugin.__name__} returned candidates for other records than given"
            for row in rows:
                output = row.get("output")
                assert output is None or isinstance(output, str), row
                assert output is not None or row.get("error"), \
                    f"a candidate without output must say why (error): {row}"

    def test_estimate_makes_no_call(self, tmp_path: Path) -> None:
        estimate = self.make(tmp_path).estimate(_records(self.records))
        assert {"calls", "cost_usd"} <= set(estimate), estimate

    records: ClassVar[list[dict[str, Any]]] = SAMPLE_RECORDS


SUITES: dict[str, type] = {"sources": SourceSuite, "filters": FilterSuite,
                           "judges": JudgeSuite, "metrics": MetricSuite, "sinks": SinkSuite,
                           "generators": GeneratorSuite}
"""The suite of each plugin kind."""
