"""Judge replies are bounded and never a NaN score: a reply past ``max_response_bytes`` is
an error read no further (memory stays bounded); a non-finite number from a logprob, a
parsed score or a judge's own arithmetic is an error; a metric over nothing but errors has
no value and says why; an alert on it fails the gate under ``runner.fail_on=error``."""

from __future__ import annotations

import asyncio
import math
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from evalkit.judges.llm._transport import AiohttpTransport, CallError
from evalkit.judges.llm.geval import GEvalJudge
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from evalkit.plugin import Judge
from evalkit.runner.judging import JudgeRunner
from tests.reliability.judge_support import FakeLLMServer, Reply, judge, make, records
from tests.trust.big_reply import BigReplyServer

MB = 1 << 20


@pytest.fixture
def ctx(tmp_path: Path) -> Any:
    from evalkit.context import RunContext
    from evalkit.judges.llm import _engine

    _engine._ENGINES.clear()
    yield RunContext(run_id="t", experiment="t", run_dir=tmp_path / "run",
                     runs_dir=tmp_path / "runs", cache_dir=tmp_path / "cache")
    _engine._ENGINES.clear()


@pytest.mark.parametrize("size, declared", [(None, False), (3 << 30, True), (40 * MB, False)])
def test_a_huge_reply_is_an_error_read_no_further(size: int | None, declared: bool) -> None:
    server = BigReplyServer(size, declared).start()
    try:
        transport = AiohttpTransport(server.url, "m", None)

        async def call() -> None:
            try:
                await transport.complete([{"role": "user", "content": "hi"}], {}, 60.0,
                                         max_bytes=2 * MB)
            finally:
                await transport.aclose()

        tracemalloc.start()
        t0 = time.monotonic()
        with pytest.raises(CallError) as caught:
            asyncio.run(call())
        took = time.monotonic() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        server.stop()
    assert caught.value.cause == "too_large" and not caught.value.retryable
    assert "larger than 2,097,152 bytes (max_response_bytes)" in str(caught.value)
    assert took < 10
    assert peak < 12 * MB, f"{peak / MB:.0f} MiB held for a 2 MiB cap"


def test_the_judgment_says_too_large_and_is_not_retried(ctx: Any) -> None:
    server = BigReplyServer(None).start()
    try:
        j = make(HallucinationLlmJudge, ctx, None, api_base=server.url,
                 max_response_bytes=MB, cache=False)
        [row] = judge(j, records({"output": "Paris.", "context": ["Paris is in France."]}))
    finally:
        server.stop()
    assert (row["status"], row["error_cause"], row["attempts"]) == ("error", "too_large", 1)
    assert row.get("value") is None


@pytest.mark.parametrize("logprob", [math.nan, math.inf, -math.inf])
def test_a_non_finite_logprob_is_an_error_never_a_score(ctx: Any, logprob: float) -> None:
    server = FakeLLMServer().start()
    try:
        answer = '{"score": 4, "reason": "ok"}'
        tokens = ['{"', 'score', '":', ' ', '4', ',', ' "reason": "ok"}']
        logprobs = [{"token": t, "logprob": 0.0, "top_logprobs": [{"token": t, "logprob": 0.0}]}
                    for t in tokens]
        logprobs[4] = {"token": "4", "logprob": logprob,
                       "top_logprobs": [{"token": "4", "logprob": logprob},
                                        {"token": "3", "logprob": -1.0}]}
        server.plan = lambda body: Reply(content=answer, logprobs=logprobs)
        j = make(GEvalJudge, ctx, server, criteria="Tone.", cache=False, parse_retries=0,
                 steps=["Read it."])
        rows = judge(j, records({"output": "Fine."}, {"output": "Also fine."}))
    finally:
        server.stop()
    assert [r["status"] for r in rows] == ["error", "error"], rows
    assert all(r.get("value") is None and "finite" in r["error"] for r in rows)


class _NanJudge(Judge):
    """A judge whose own arithmetic goes wrong: 0/0, inf - inf."""

    class Config:
        pass

    def judge(self, batch: pa.Table) -> list[dict[str, Any]]:
        values = [math.nan, math.inf, -math.inf, 0.5]
        return [{"record_id": r, "status": "ok", "value": values[i % 4], "passed": True}
                for i, r in enumerate(batch.column("record_id").to_pylist())]


def test_a_judges_non_finite_value_is_an_error_never_a_score() -> None:
    from evalkit.config import PluginInstance

    inst = PluginInstance("judges", "nan", "nan", _NanJudge, _NanJudge.Config())
    runner = JudgeRunner([(inst, _NanJudge("nan", None, None))], "t", dry_run=False)
    table = records(*({"output": str(i)} for i in range(4)))
    [out] = runner.run(table)
    rows = out.to_pylist()
    assert [r["status"] for r in rows] == ["error", "error", "error", "ok"]
    assert [r["error_cause"] for r in rows] == ["non_finite"] * 3 + [None]
    assert [r["value"] for r in rows] == [None, None, None, 0.5]
    assert [r["passed"] for r in rows[:3]] == [None] * 3


@pytest.mark.e2e
def test_a_metric_of_errors_has_no_value_and_fails_the_gate(tmp_path: Path) -> None:
    """The issue's run: G-Eval logprobs of NaN, the error budget off, an error alert on the
    mean. It exits 3 and says why, instead of 0."""
    import json

    from tests.conftest import run_cli
    from tests.reliability.judge_support import write_records

    server = FakeLLMServer().start()
    try:
        server.answer = lambda body: '{"score": 4, "reason": "ok"}'
        nan = float("nan")
        server.plan = lambda body: Reply(logprobs=[
            {"token": '{"score": ', "logprob": 0.0},
            {"token": "4", "logprob": nan, "top_logprobs": [{"token": "4", "logprob": nan}]},
            {"token": ', "reason": "ok"}', "logprob": 0.0}])
        data = write_records(tmp_path / "data.jsonl",
                             [{"input": f"q{i}", "output": f"a{i}"} for i in range(4)])
        proc = run_cli(
            "run", "source=jsonl", f"source.path={data}", "+source.record_id=id",
            "+judges.tone.plugin=geval", "+judges.tone.criteria=Tone.",
            "+judges.tone.model=openai/fake", f"+judges.tone.api_base={server.url}",
            "+judges.tone.parse_retries=0", "+metrics.tone_mean.plugin=mean",
            "+metrics.tone_mean.judge=tone", "runner.max_judge_error_rate=null",
            "runner.fail_on=error",
            "+alerts=[{metric:tone_mean,operator:'<',value:0.5,severity:error}]",
            cwd=tmp_path, check=False)
    finally:
        server.stop()
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tone_mean" in proc.stderr and "cannot be checked: the metric has no value (every "\
        "judgment from judge 'tone' is an error (4;" in proc.stderr, proc.stderr
    assert "cannot be checked: the metric has no value" in \
        proc.stderr, proc.stderr
    [manifest] = list((tmp_path / "runs").glob("*/*/manifest.json"))
    assert json.loads(manifest.read_text())["status"] in ("ok", "failed")
