"""``failure_mode_llm``: the LLM half of failure-mode classification. It sorts flagged
records into the audit's taxonomy when deterministic rules cannot decide. It is a judge plugin
of its own and a reusable classifier: the deterministic ``failure_mode`` judge can build a
:class:`FailureModeLlmJudge` with a :class:`FailureModeLlmConfig` and ``await
judge.ajudge(undecided_records)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import choice, parse_json_object

__all__ = [
    "FAILURE_MODES", "FORMAT", "SCHEMA", "SCOPES", "TASK", "classify_failure_modes",
    "FailureModeLlmConfig", "FailureModeLlmJudge",
]

FAILURE_MODES: dict[str, str] = {
    "pipeline_failure": "the call failed in the infrastructure: the 'output' is an error "
                        "message, a request envelope, empty or cut off by the system, not a "
                        "model completion",
    "prompt_echo": "the output repeats the prompt or input instead of doing the task",
    "fabricated_tool_api": "the output invents a tool, function, API, endpoint, field or "
                           "parameter that the input and context do not provide",
    "tool_output_misinterpretation": "the output misreads, misquotes or contradicts the tool "
                                     "results or context it was given",
    "instruction_skipping": "the output ignores or skips explicit instructions of the input "
                            "(required format, constraints, steps)",
    "other": "a failure none of the above describes",
    "none": "no failure: a genuine completion that does what the input asks",
}
SCOPES = ("excluded", "included", "all")
TASK = ("You diagnose why an LLM application's output failed. Classify the record into exactly "
        "one failure mode:\n" + "\n".join(f"- {k}: {v}" for k, v in FAILURE_MODES.items()))
FORMAT = ('{"label": "<one failure mode name>", "explanation": "<one or two sentences citing '
          'the evidence>"}')
SCHEMA = P.object_schema(label={"enum": list(FAILURE_MODES)}, explanation={"type": "string"})


@dataclass(frozen=True)
class FailureModeLlmConfig(LlmJudgeConfig):
    records: str = "all"  # which to classify: excluded (set aside by a filter), included, all
    max_context_items: int = 20  # context passages (tool results) shown to the judge

    def validate(self) -> None:
        super().validate()
        if self.records not in SCOPES:
            raise ValueError(f"records: {self.records!r} is not one of {', '.join(SCOPES)}")


def _parse(text: str, logprobs: Any) -> tuple[str, str]:
    obj = parse_json_object(text, ("label",))
    return choice(obj, "label", tuple(FAILURE_MODES)), str(obj.get("explanation", ""))


class FailureModeLlmJudge(LlmJudge):
    """label: one of :data:`FAILURE_MODES`; explanation: the judge's evidence. No value: a
    failure mode is a category, not a score. Sees records that filters set aside."""

    Config = FailureModeLlmConfig
    applies_to_excluded = True
    columns = ("record_id", "input", "output", "context", "level", "status_message",
               "excluded_by", "exclude_reason")
    output_tokens_per_call = 80

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        flagged = record.get("excluded_by") is not None
        if self.config.records == "excluded" and not flagged:
            return "not set aside by a filter (records: excluded)"
        if self.config.records == "included" and flagged:
            return f"set aside by filter {record['excluded_by']} (records: included)"
        return None

    def messages(self, record: dict[str, Any]) -> list[dict[str, str]]:
        facts = {k: record.get(k) for k in ("level", "status_message", "excluded_by",
                                            "exclude_reason") if record.get(k)}
        blocks = [P.block("input", record.get("input"))]
        if record.get("context"):
            blocks.append(P.context_block(record["context"], self.config.max_context_items))
        blocks.append(P.block("output", record.get("output")))
        if facts:
            blocks.append(P.block("observation", "\n".join(f"{k}: {v}" for k, v in
                                                           facts.items())))
        return P.messages(P.system(TASK, FORMAT), *blocks)

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        return [Call(self.messages(record), _parse, "failure_mode", SCHEMA)]

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        [call] = self.planned_calls(record)
        result = await self.ask(call)
        if not result.ok:
            return failed(record["record_id"], [result], "failure-mode classification")
        label, explanation = result.value
        return {**accounting(record["record_id"], [result]), "status": "ok", "label": label,
                "explanation": explanation, "raw": result.raw}


async def classify_failure_modes(table: Any, ctx: Any, name: str = "failure_mode",
                                 **options: Any) -> list[dict[str, Any]]:
    """Classify every record of ``table`` (a records table) into :data:`FAILURE_MODES`.
    ``options`` are :class:`FailureModeLlmConfig` fields (``model`` at least); a bad option
    raises ValueError. Returns judgment rows (label, explanation, accounting) as the judge
    does."""
    config = FailureModeLlmConfig(**options)
    config.validate()
    return await FailureModeLlmJudge(name, config, ctx).ajudge(table)
