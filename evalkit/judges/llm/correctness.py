"""``correctness``: is the output a correct answer, judged against the record's reference
answer? Records without a reference are skipped (there is nothing to judge against)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import choice, parse_json_object

__all__ = ["FORMAT", "SCHEMA", "TASK", "VERDICTS", "CorrectnessLlmConfig", "CorrectnessLlmJudge"]

VERDICTS = {"correct": 1.0, "partially_correct": 0.5, "incorrect": 0.0}
TASK = (
    "You grade the correctness of an AI output against a reference answer for the same input. "
    "The output is correct when it states the same facts and conclusion as the reference "
    "(wording may differ), partially_correct when it gets part of it right or adds an error "
    "of minor importance, and incorrect when it contradicts the reference or misses its point."
)
FORMAT = ('{"reasoning": "<one or two sentences>", "verdict": "<correct, partially_correct or '
          'incorrect>"}')
SCHEMA = P.object_schema(reasoning={"type": "string"}, verdict={"enum": list(VERDICTS)})


@dataclass(frozen=True)
class CorrectnessLlmConfig(LlmJudgeConfig):
    pass_partial: bool = False  # count partially_correct as passed


class CorrectnessLlmJudge(LlmJudge):
    """value: 1 (correct), 0.5 (partially correct) or 0 (incorrect); label the verdict."""

    Config = CorrectnessLlmConfig
    columns = ("record_id", "input", "output", "reference")
    output_tokens_per_call = 80

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        if not (record.get("reference") or "").strip():
            return "no reference answer to judge correctness against"
        return None

    def messages(self, record: dict[str, Any]) -> list[dict[str, str]]:
        return P.messages(P.system(TASK, FORMAT), P.block("input", record.get("input")),
                          P.block("reference", record.get("reference")),
                          P.block("output", record.get("output")))

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        return [Call(self.messages(record), self.parse, "correctness", SCHEMA)]

    @staticmethod
    def parse(text: str, logprobs: Any) -> tuple[str, str]:
        obj = parse_json_object(text, ("verdict",))
        return choice(obj, "verdict", tuple(VERDICTS)), str(obj.get("reasoning", ""))

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        [call] = self.planned_calls(record)
        result = await self.ask(call)
        if not result.ok:
            return failed(record["record_id"], [result], "correctness")
        verdict, reasoning = result.value
        passed = verdict == "correct" or (self.config.pass_partial
                                          and verdict == "partially_correct")
        return {**accounting(record["record_id"], [result]), "status": "ok",
                "value": VERDICTS[verdict], "label": verdict, "passed": passed,
                "explanation": reasoning, "raw": result.raw}
