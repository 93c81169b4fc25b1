"""``qag_faithfulness``: question-answer generation faithfulness. The output is broken into
atomic claims (at most ``max_claims``), each turned into a yes/no verification question, and
every question is answered from the record's context only (at most ``max_context_items``
passages) as yes, no or unknown. faithfulness = yes / (yes + no); hallucination = 1 −
faithfulness. Claims, questions and answers are kept in ``details``.

Records without context are skipped: there is nothing to ground the output against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.checks import check_unit_interval
from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import choice, indexed, objects, parse_json_object, require

__all__ = [
    "ANSWER_FORMAT", "ANSWER_SCHEMA", "ANSWER_TASK", "ANSWERS", "CLAIMS_FORMAT", "CLAIMS_SCHEMA",
    "CLAIMS_TASK", "SCORES", "QagFaithfulnessConfig", "QagFaithfulnessJudge",
]

SCORES = ("faithfulness", "hallucination")
ANSWERS = ("yes", "no", "unknown")
CLAIMS_TASK = (
    "You extract the atomic factual claims that an AI output makes. An atomic claim is one "
    "short, self-contained statement of fact (resolve pronouns; one fact per claim). Skip "
    "greetings, opinions, questions and instructions. Return at most {max_claims} claims, the "
    "most important first. For each claim write a yes/no verification question whose answer "
    "is yes exactly when the claim is true."
)
CLAIMS_FORMAT = ('{"claims": [{"claim": "<atomic claim>", "question": "<yes/no question>"}]} '
                 '(an empty list when the output makes no factual claim)')
CLAIMS_SCHEMA = P.list_schema("claims", claim={"type": "string"}, question={"type": "string"})
ANSWER_TASK = (
    "You answer yes/no verification questions using ONLY the given context passages, not your "
    "own knowledge. Answer yes when the context states or directly implies it, no when the "
    "context contradicts it, and unknown when the context does not say."
)
ANSWER_FORMAT = ('{"answers": [{"index": <question index>, "answer": "<yes, no or unknown>"}]} '
                 "with exactly one answer per question")
ANSWER_SCHEMA = P.list_schema("answers", index={"type": "integer"},
                              answer={"enum": list(ANSWERS)})


@dataclass(frozen=True)
class QagFaithfulnessConfig(LlmJudgeConfig):
    score: str = "faithfulness"  # the value column: faithfulness, or hallucination (1 − it)
    threshold: float = 0.8  # passed when faithfulness is at least this
    max_claims: int = 20  # claims extracted per output
    max_context_items: int = 20  # context passages the questions are answered from

    def validate(self) -> None:
        super().validate()
        if self.score not in SCORES:
            raise ValueError(f"score: {self.score!r} is not one of {', '.join(SCORES)}")
        check_unit_interval(self.threshold, "threshold")
        if self.max_claims < 1 or self.max_context_items < 1:
            raise ValueError("max_claims and max_context_items: must be at least 1")


def _parse_claims(limit: int):  # -> Parser
    def parse(text: str, logprobs: Any) -> list[dict[str, str]]:
        return [{"claim": require(item, "claim", str).strip(),
                 "question": require(item, "question", str).strip()}
                for item in objects(parse_json_object(text, ("claims",)), "claims")][:limit]
    return parse


def _parse_answers(n: int):  # -> Parser
    def parse(text: str, logprobs: Any) -> list[str]:
        return indexed(parse_json_object(text, ("answers",)), "answers", 1, n,
                       lambda item: choice(item, "answer", ANSWERS), "no answer for question(s)")
    return parse


class QagFaithfulnessJudge(LlmJudge):
    """Two calls per record (claims with questions; answers). value: faithfulness (or
    hallucination with ``score: hallucination``); label ``faithful`` or ``unfaithful``."""

    Config = QagFaithfulnessConfig
    columns = ("record_id", "input", "output", "context")
    output_tokens_per_call = 400

    def offline_value(self, unit: float) -> float:
        # the stand-in is a faithfulness; a hallucination instance reports 1 − it, so two
        # instances on the same records stay complementary offline as they are online
        return unit if self.config.score == "faithfulness" else 1 - unit

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        if not any(c and c.strip() for c in record.get("context") or []):
            return "no context to ground the output against"
        return None

    def claims_messages(self, record: dict[str, Any]) -> list[dict[str, str]]:
        task = CLAIMS_TASK.format(max_claims=self.config.max_claims)
        return P.messages(P.system(task, CLAIMS_FORMAT), P.block("output", record.get("output")))

    def answer_messages(self, record: dict[str, Any],
                        questions: list[str]) -> list[dict[str, str]]:
        listed = "\n".join(f'<question index="{i}">{P.escape(q)}</question>'
                           for i, q in enumerate(questions, 1))
        return P.messages(P.system(ANSWER_TASK, ANSWER_FORMAT),
                          P.context_block(record["context"], self.config.max_context_items),
                          f"<questions>\n{listed}\n</questions>")

    def claims_call(self, record: dict[str, Any]) -> Call:
        return Call(self.claims_messages(record), _parse_claims(self.config.max_claims),
                    "claims", CLAIMS_SCHEMA)

    def answers_call(self, record: dict[str, Any], questions: list[str]) -> Call:
        return Call(self.answer_messages(record, questions), _parse_answers(len(questions)),
                    "answers", ANSWER_SCHEMA)

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        first = self.claims_call(record)
        known = self.cached(first)
        if known is None:  # the questions come from the first answer: approximate them
            return [first, self.answers_call(record, [record.get("output") or ""])]
        if not known.value:
            return [first]
        return [first, self.answers_call(record, [c["question"] for c in known.value])]

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        cfg = self.config
        first = await self.ask(self.claims_call(record))
        if not first.ok:
            return failed(rid, [first], "claim extraction")
        claims = first.value
        if not claims:
            return {**accounting(rid, [first]), "status": "skipped", "raw": first.raw,
                    "explanation": "the output makes no factual claim to verify",
                    "details": {"claims": []}}
        questions = [c["question"] for c in claims]
        second = await self.ask(self.answers_call(record, questions))
        if not second.ok:
            return failed(rid, [first, second], "verification", {"claims": claims})
        for claim, answer in zip(claims, second.value, strict=True):
            claim["answer"] = answer
        yes = sum(a == "yes" for a in second.value)
        no = sum(a == "no" for a in second.value)
        unknown = len(claims) - yes - no
        details: dict[str, Any] = {"claims": claims, "yes": yes, "no": no, "unknown": unknown}
        row = {**accounting(rid, [first, second]), "raw": second.raw}
        if yes + no == 0:
            return {**row, "status": "skipped", "details": details,
                    "explanation": f"none of the {unknown} claims can be checked against the "
                                   "context (all unknown)"}
        faithfulness = yes / (yes + no)
        details.update(faithfulness=faithfulness, hallucination=1 - faithfulness)
        passed = faithfulness >= cfg.threshold
        contradicted = [c["claim"] for c in claims if c["answer"] == "no"]
        explanation = f"{yes} of {yes + no} checkable claims supported by the context" + (
            f"; contradicted: {'; '.join(contradicted)[:500]}" if contradicted else "") + (
            f"; {unknown} not covered by the context" if unknown else "")
        return {**row, "status": "ok",
                "value": faithfulness if cfg.score == "faithfulness" else 1 - faithfulness,
                "passed": passed, "label": "faithful" if passed else "unfaithful",
                "explanation": explanation, "details": details}
