"""``hallucination``: one call per record, a graded (0-1) or binary hallucination rubric
in the style of hosted evaluators (Langfuse's, for one), so that it can be compared with the
claim-by-claim ``qag_faithfulness`` judge on the same records. Higher is worse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.checks import check_unit_interval
from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import number, parse_json_object, require

__all__ = ["FORMATS", "MODES", "SCHEMAS", "TASK", "HallucinationLlmConfig", "HallucinationLlmJudge"]

MODES = ("graded", "binary")
TASK = (
    "You are a strict evaluator of hallucination. Decide whether the AI output contains "
    "hallucinations: statements that are not supported by, or that contradict, the context "
    "(when context is given) or the input (when it is not). Unverifiable specifics (names, "
    "numbers, dates, citations, API names) that the material does not support count as "
    "hallucinations; style and omissions do not."
)
FORMATS = {
    "graded": '{"reasoning": "<one or two sentences>", "score": <a number from 0 to 1: 0 = no '
              'hallucination, 1 = entirely hallucinated>}',
    "binary": '{"reasoning": "<one or two sentences>", "hallucinated": <true or false>}',
}
SCHEMAS = {
    "graded": P.object_schema(reasoning={"type": "string"}, score={"type": "number"}),
    "binary": P.object_schema(reasoning={"type": "string"}, hallucinated={"type": "boolean"}),
}


@dataclass(frozen=True)
class HallucinationLlmConfig(LlmJudgeConfig):
    mode: str = "graded"  # graded (score 0-1) or binary (hallucinated true/false)
    threshold: float = 0.5  # passed when the hallucination score is below it
    max_context_items: int = 20  # context passages shown to the judge

    def validate(self) -> None:
        super().validate()
        if self.mode not in MODES:
            raise ValueError(f"mode: {self.mode!r} is not one of {', '.join(MODES)}")
        check_unit_interval(self.threshold, "threshold")


class HallucinationLlmJudge(LlmJudge):
    """value: hallucination score in [0, 1] (binary mode: 0 or 1); label ``hallucinated`` or
    ``grounded``; ``passed`` when the score is below ``threshold``."""

    Config = HallucinationLlmConfig
    columns = ("record_id", "input", "output", "context")
    output_tokens_per_call = 80

    def messages(self, record: dict[str, Any]) -> list[dict[str, str]]:
        cfg = self.config
        blocks = [P.block("input", record.get("input"))]
        if record.get("context"):
            blocks.append(P.context_block(record["context"], cfg.max_context_items))
        blocks.append(P.block("output", record.get("output")))
        return P.messages(P.system(TASK, FORMATS[cfg.mode]), *blocks)

    def call(self, record: dict[str, Any]) -> Call:
        return Call(self.messages(record), self.parse, "hallucination",
                    SCHEMAS[self.config.mode])

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        return [self.call(record)]

    def parse(self, text: str, logprobs: Any) -> tuple[float, str]:
        key = "hallucinated" if self.config.mode == "binary" else "score"
        obj = parse_json_object(text, (key,))
        reasoning = str(obj.get("reasoning", ""))
        if self.config.mode == "binary":
            return float(require(obj, "hallucinated", bool)), reasoning
        return number(obj, "score", 0.0, 1.0), reasoning

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        result = await self.ask(self.call(record))
        if not result.ok:
            return failed(record["record_id"], [result], "hallucination")
        score, reasoning = result.value
        passed = score < self.config.threshold
        return {**accounting(record["record_id"], [result]), "status": "ok", "value": score,
                "passed": passed, "label": "grounded" if passed else "hallucinated",
                "explanation": reasoning, "raw": result.raw}
