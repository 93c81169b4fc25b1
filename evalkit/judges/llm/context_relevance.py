"""``context_relevance``: an LLM judge over a retrieval record's passages, for the
``context_precision`` and ``context_recall`` metrics.

- ``score: precision`` (default): each retrieved passage (``records.context``, rank order) is
  judged relevant or not to the record's input, ``passages_per_call`` passages per call.
  ``details.relevance`` is the list of 1/0 labels aligned with ``context``, which is what
  ``context_precision`` reads with ``relevance: judge:NAME``; ``value`` is the relevant share
  (``details.average_precision`` the rank-aware figure).
- ``score: recall``: the record's ``reference`` answer is split into statements and each is
  judged attributable to the retrieved passages or not (as RAGAS's context recall); ``value``
  is the attributed share, which is what ``context_recall`` reads with ``relevant:
  judge:NAME``. Per-passage relevance cannot give recall: the relevant passages that were NOT
  retrieved are never shown to the judge, so recall needs the reference as its yardstick.

Records without passages, without an input (precision) or without a reference (recall) are
skipped: there is nothing to judge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.analysis.ranking import average_precision
from evalkit.checks import check_unit_interval
from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import indexed, objects, parse_json_object, require

__all__ = [
    "RECALL_FORMAT", "RECALL_SCHEMA", "RECALL_TASK", "RELEVANCE_FORMAT", "RELEVANCE_SCHEMA",
    "RELEVANCE_TASK", "SCORES", "ContextRelevanceConfig", "ContextRelevanceJudge",
]

SCORES = ("precision", "recall")
RELEVANCE_TASK = (
    "You judge a retrieval system. For each numbered passage, decide whether it is relevant "
    "to the question: relevant is true when the passage contains information that helps "
    "answer the question (fully or in part), and false when it is off-topic or only shares "
    "words with the question without helping to answer it. Judge every passage on its own."
)
RELEVANCE_FORMAT = ('{"passages": [{"index": <passage index>, "relevant": <true or false>}]} '
                    "with exactly one entry per passage")
RELEVANCE_SCHEMA = P.list_schema("passages", index={"type": "integer"},
                                 relevant={"type": "boolean"})
RECALL_TASK = (
    "You measure how much of a reference answer the retrieved context covers. Split the "
    "reference answer into its atomic statements (one fact each, pronouns resolved; at most "
    "{max_statements}). For each statement decide, using ONLY the context passages and not "
    "your own knowledge, whether it can be attributed to the context: attributed is true "
    "when some passage states it or directly implies it, false otherwise."
)
RECALL_FORMAT = ('{"statements": [{"statement": "<atomic statement>", "attributed": <true or '
                 'false>}]} (an empty list when the reference states no fact)')
RECALL_SCHEMA = P.list_schema("statements", statement={"type": "string"},
                              attributed={"type": "boolean"})


@dataclass(frozen=True)
class ContextRelevanceConfig(LlmJudgeConfig):
    score: str = "precision"  # precision: per-passage relevance; recall: reference coverage
    passages_per_call: int = 10  # precision: passages judged per call (all are judged)
    max_statements: int = 20  # recall: reference statements checked
    threshold: float = 0.5  # passed when value is at least this

    def validate(self) -> None:
        super().validate()
        if self.score not in SCORES:
            raise ValueError(f"score: {self.score!r} is not one of {', '.join(SCORES)}")
        if self.passages_per_call < 1 or self.max_statements < 1:
            raise ValueError("passages_per_call and max_statements: must be at least 1")
        check_unit_interval(self.threshold, "threshold")


def _flag(item: dict[str, Any], key: str) -> bool:
    """A true/false answer; "yes"/"no" and "true"/"false" strings are read too."""
    value = item.get(key)
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "no", "false"):
        return value.strip().lower() in ("yes", "true")
    return require(item, key, bool)


def _parse_relevance(first: int, last: int):  # -> Parser
    def parse(text: str, logprobs: Any) -> list[bool]:
        return indexed(parse_json_object(text, ("passages",)), "passages", first, last,
                       lambda item: _flag(item, "relevant"), "no label for passage(s)")
    return parse


def _parse_statements(limit: int):  # -> Parser
    def parse(text: str, logprobs: Any) -> list[dict[str, Any]]:
        return [{"statement": require(item, "statement", str).strip(),
                 "attributed": _flag(item, "attributed")}
                for item in objects(parse_json_object(text, ("statements",)), "statements")][:limit]
    return parse


class ContextRelevanceJudge(LlmJudge):
    """Precision: ceil(passages / passages_per_call) calls per record, details.relevance.
    Recall: one call per record, value = attributed share of the reference's statements."""

    Config = ContextRelevanceConfig
    columns = ("record_id", "input", "context", "reference")
    output_tokens_per_call = 300

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        if not record.get("context"):
            return "no retrieved passages to judge"
        if self.config.score == "recall":
            if not (record.get("reference") or "").strip():
                return "no reference answer to measure context recall against"
        elif not P.render(record.get("input")).strip():
            return "no input (question) to judge the passages' relevance to"
        return None

    def relevance_calls(self, record: dict[str, Any]) -> list[Call]:
        """One call per chunk of ``passages_per_call`` passages, in rank order."""
        context = record["context"]
        size = self.config.passages_per_call
        calls = []
        for start in range(0, len(context), size):
            chunk = context[start:start + size]
            msgs = P.messages(P.system(RELEVANCE_TASK, RELEVANCE_FORMAT),
                              P.block("question", record.get("input")),
                              P.context_block(chunk, start=start + 1))
            calls.append(Call(msgs, _parse_relevance(start + 1, start + len(chunk)),
                              "context_relevance", RELEVANCE_SCHEMA))
        return calls

    def recall_call(self, record: dict[str, Any]) -> Call:
        """The call splitting the reference into statements and attributing each."""
        task = RECALL_TASK.format(max_statements=self.config.max_statements)
        msgs = P.messages(P.system(task, RECALL_FORMAT),
                          P.block("question", record.get("input")),
                          P.block("reference", record.get("reference")),
                          P.context_block(record["context"]))
        return Call(msgs, _parse_statements(self.config.max_statements), "context_recall",
                    RECALL_SCHEMA)

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        if self.config.score == "recall":
            return [self.recall_call(record)]
        return self.relevance_calls(record)

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        if self.config.score == "recall":
            return await self._recall(record)
        return await self._precision(record)

    async def _precision(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        results = []
        labels: list[bool] = []
        for call in self.relevance_calls(record):
            result = await self.ask(call)
            results.append(result)
            if not result.ok:  # a partial labelling would misalign with context: no score
                return failed(rid, results, "passage relevance")
            labels += result.value
        relevance = [int(x) for x in labels]
        share = sum(relevance) / len(relevance)
        ap = average_precision(np.array(relevance, dtype=float))
        ranks = [i for i, x in enumerate(relevance, 1) if x]
        return {**accounting(rid, results), "status": "ok", "value": share,
                "passed": share >= self.config.threshold, "raw": results[-1].raw,
                "explanation": f"{sum(relevance)} of {len(relevance)} retrieved passages "
                               "relevant" + (f" (ranks {', '.join(map(str, ranks))})"
                                             if ranks else ""),
                "details": {"relevance": relevance, "relevant": sum(relevance),
                            "retrieved": len(relevance), "average_precision": ap}}

    async def _recall(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        result = await self.ask(self.recall_call(record))
        if not result.ok:
            return failed(rid, [result], "context recall")
        statements = result.value
        row = {**accounting(rid, [result]), "raw": result.raw}
        if not statements:
            return {**row, "status": "skipped", "details": {"statements": []},
                    "explanation": "the reference states no fact to look for in the context"}
        attributed = sum(s["attributed"] for s in statements)
        recall = attributed / len(statements)
        missing = [s["statement"] for s in statements if not s["attributed"]]
        explanation = f"{attributed} of {len(statements)} reference statements found in " \
                      "the context" + (f"; missing: {'; '.join(missing)[:500]}"
                                       if missing else "")
        return {**row, "status": "ok", "value": recall,
                "passed": recall >= self.config.threshold, "explanation": explanation,
                "details": {"statements": statements, "attributed": attributed,
                            "recall": recall}}
