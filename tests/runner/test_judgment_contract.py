"""A judge returns exactly one judgment per record it is given. The runner writes them in
record order whatever order they came in; a result that breaks the rule (a record left out,
one judged twice, a record it was not given) costs the judge the batch: every record gets an
error judgment naming the breach, never a silent gap."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pytest

from evalkit.config import PluginInstance
from evalkit.plugin import AsyncJudge, Judge
from evalkit.results.schemas import RECORDS, conform
from evalkit.runner.judging import JudgeRunner


@dataclass(frozen=True)
class _Config:
    pass


class _Returns(Judge):
    """Returns the rows ``pick`` chooses from one judgment per record."""

    Config = _Config

    def __init__(self, pick):
        super().__init__("j", _Config(), None)
        self.pick = pick

    def judge(self, records: pa.Table) -> list[dict]:
        ids = records.column("record_id").to_pylist()
        rows = [{"record_id": r, "status": "ok", "value": float(i)} for i, r in enumerate(ids)]
        return self.pick(rows)


class _AsyncReturns(AsyncJudge):
    Config = _Config

    def __init__(self, pick):
        super().__init__("j", _Config(), None)
        self.sync = _Returns(pick)

    async def ajudge(self, records: pa.Table) -> list[dict]:
        return self.sync.judge(records)


def _run(plugin, excluded=()):
    inst = PluginInstance("judges", "j", "test", type(plugin), _Config())
    records = conform([{"record_id": f"r{i}", "output": "x",
                        "excluded_by": "f" if i in excluded else None}
                       for i in range(4)], RECORDS, {"run_id": "run"})
    parts = JudgeRunner([(inst, plugin)], "run", dry_run=False).run(records)
    return pa.concat_tables(parts).to_pylist()


@pytest.mark.parametrize("judge", [_Returns, _AsyncReturns])
def test_one_judgment_per_record_is_kept_in_record_order(judge):
    rows = _run(judge(lambda rows: rows[::-1]), excluded=(1,))
    assert [r["record_id"] for r in rows] == ["r0", "r1", "r2", "r3"]
    assert [r["status"] for r in rows] == ["ok", "skipped", "ok", "ok"]
    assert [r["value"] for r in rows] == [0.0, None, 1.0, 2.0]


@pytest.mark.parametrize("judge", [_Returns, _AsyncReturns])
@pytest.mark.parametrize("pick, breach", [
    (lambda rows: rows[:1], "3 records without a judgment"),
    (lambda rows: [*rows, rows[0]], "1 record judged more than once"),
    (lambda rows: [*rows[:-1], {**rows[-1], "record_id": "other"}],
     "1 judgment of a record it was not given"),
    (lambda rows: [], "4 records without a judgment"),
])
def test_a_result_that_breaks_the_rule_is_an_error_for_every_record(judge, pick, breach):
    rows = _run(judge(pick))
    assert [r["record_id"] for r in rows] == ["r0", "r1", "r2", "r3"]
    assert {r["status"] for r in rows} == {"error"}
    assert all(r["value"] is None for r in rows)
    message = rows[0]["error"]
    assert breach in message and "exactly one judgment per record" in message
