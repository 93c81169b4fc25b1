"""``citation_support``: does each cited passage support the claim the output attributes to
it? The support judge of the ``citation_precision`` metric.

The output's citations are found with the metric's own :func:`extract_citations` (same
``pattern``, same ``ids``), so judge and metric agree on what a citation is. A citation whose
id names no passage of the record is not sent to the model: it cannot be supported, and the
metric counts it so deterministically. The others go to the model in ONE call per record:
every (claim, cited passage) pair, numbered, each passage escaped inside its own block. One
call rather than one per citation because the verdicts are independent yes/no checks that a
model answers well side by side, and a record typically cites the same few passages many
times (a call each would multiply the cost by the citations per output); identical
(id, claim) pairs are asked once.

``details.citations`` lists every citation in order of appearance as
``{"id", "claim", "in_context", "supported"}`` (``supported`` is null for an id missing
from the context), which is the shape ``citation_precision`` reads; ``value`` is the
supported share of the citations whose id exists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.analysis.citations import (
    Citation,
    check_citation_settings,
    extract_citations,
)
from evalkit.checks import check_unit_interval
from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import indexed, parse_json_object, require
from evalkit.paths import value_at

__all__ = ["FORMAT", "SCHEMA", "TASK", "CitationSupportConfig", "CitationSupportJudge"]

TASK = (
    "You check citations in an AI output. Each numbered item gives a claim from the output "
    "and the passage the output cites for it. Decide, for each item separately and using "
    "ONLY that passage (not your own knowledge, not the other passages), whether the passage "
    "supports the claim: supported is true when the passage states the claim or directly "
    "implies it, and false when the passage contradicts it, is about something else, or "
    "supports only part of it."
)
FORMAT = ('{"citations": [{"index": <item index>, "reason": "<one short sentence>", '
          '"supported": <true or false>}]} with exactly one entry per item')
SCHEMA = P.list_schema("citations", index={"type": "integer"}, reason={"type": "string"},
                       supported={"type": "boolean"})


@dataclass(frozen=True)
class CitationSupportConfig(LlmJudgeConfig):
    pattern: str = r"\[([^\]]+)\]"  # citation regex, group 1 the id(s); as citation_precision
    ids: str = "position"  # position: 1-based context indices; metadata.<path>: id list
    threshold: float = 1.0  # passed when the supported share is at least this

    def validate(self) -> None:
        super().validate()
        check_citation_settings(self.pattern, self.ids)
        check_unit_interval(self.threshold, "threshold")


def _parse_verdicts(n: int):  # -> Parser
    def parse(text: str, logprobs: Any) -> list[tuple[bool, str]]:
        return indexed(parse_json_object(text, ("citations",)), "citations", 1, n, _verdict,
                       "no verdict for item(s)")
    return parse


def _verdict(item: dict[str, Any]) -> tuple[bool, str]:
    return require(item, "supported", bool), str(item.get("reason", ""))


class CitationSupportJudge(LlmJudge):
    """One call per record with citations to existing passages. value: supported share of
    those citations; label ``supported`` (all of them) or ``unsupported``."""

    Config = CitationSupportConfig
    columns = ("record_id", "output", "context", "metadata")
    output_tokens_per_call = 300

    def passages(self, record: dict[str, Any]) -> dict[str, str] | str:
        """The record's passages by the id a citation names, or why the ids are unknown."""
        context = record.get("context") or []
        if self.config.ids == "position":
            return {str(i): text for i, text in enumerate(context, 1)}
        ids = value_at(record.get("metadata"), self.config.ids.split(".", 1)[1])
        if not isinstance(ids, list) or len(ids) != len(context):
            return (f"{self.config.ids} is not a list of {len(context)} passage ids aligned "
                    "with context")
        return {str(pid): text for pid, text in zip(ids, context, strict=True)}

    def citations(self, record: dict[str, Any]) -> list[Citation]:
        """The output's citations, in order of appearance."""
        return extract_citations(record.get("output") or "", self.config.pattern)

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        if not record.get("context"):
            return "no context: the citations name no passage to check"
        if not self.citations(record):
            return "the output cites no passage"
        passages = self.passages(record)
        if isinstance(passages, str):
            return passages
        return None

    @staticmethod
    def items(citations: list[Citation], passages: dict[str, str]) -> list[tuple[str, str]]:
        """The distinct (id, claim) pairs to ask about: citations naming an existing passage."""
        return list(dict.fromkeys((c.id, c.claim) for c in citations if c.id in passages))

    def messages(self, items: list[tuple[str, str]],
                 passages: dict[str, str]) -> list[dict[str, str]]:
        listed = "\n".join(
            f'<item index="{i}">\n<claim>\n{P.escape(claim)}\n</claim>\n'
            f'<passage id="{P.escape(cid)}">\n{P.escape(P.render(passages[cid]))}\n</passage>'
            f"\n</item>" for i, (cid, claim) in enumerate(items, 1))
        return P.messages(P.system(TASK, FORMAT), f"<citations>\n{listed}\n</citations>")

    def call(self, items: list[tuple[str, str]], passages: dict[str, str]) -> Call:
        return Call(self.messages(items, passages), _parse_verdicts(len(items)),
                    "citation_support", SCHEMA)

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        passages = self.passages(record)
        if isinstance(passages, str):  # skipped: no call
            return []
        items = self.items(self.citations(record), passages)
        return [self.call(items, passages)] if items else []

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        passages = self.passages(record)
        if isinstance(passages, str):  # skip_reason refuses these records first
            return {"record_id": rid, "status": "skipped", "attempts": 0,
                    "explanation": passages}
        citations = self.citations(record)
        items = self.items(citations, passages)
        missing = [c.id for c in citations if c.id not in passages]
        if not items:
            return {"record_id": rid, "status": "skipped", "attempts": 0,
                    "explanation": f"none of the {len(citations)} citations names a passage "
                                   f"of the context (ids {', '.join(dict.fromkeys(missing))}); "
                                   "citation_precision counts them unsupported",
                    "details": {"citations": [_entry(c, False) for c in citations]}}
        result = await self.ask(self.call(items, passages))
        if not result.ok:
            return failed(rid, [result], "citation support",
                          {"citations": [_entry(c, c.id in passages) for c in citations]})
        verdicts = dict(zip(items, result.value, strict=True))
        entries = [_entry(c, c.id in passages, verdicts.get((c.id, c.claim)))
                   for c in citations]
        checked = [e for e in entries if e["in_context"]]
        supported = sum(e["supported"] for e in checked)
        share = supported / len(checked)
        unsupported = [f"[{e['id']}] {e['claim']}" for e in checked if not e["supported"]]
        explanation = f"{supported} of {len(checked)} citations supported by their passage" + (
            f"; unsupported: {'; '.join(unsupported)[:500]}" if unsupported else "") + (
            f"; {len(missing)} cite an id missing from the context" if missing else "")
        return {**accounting(rid, [result]), "status": "ok", "value": share,
                "passed": share >= self.config.threshold,
                "label": "supported" if supported == len(checked) else "unsupported",
                "explanation": explanation, "raw": result.raw,
                "details": {"citations": entries, "supported": supported,
                            "checked": len(checked), "id_missing": len(missing)}}


def _entry(citation: Citation, in_context: bool,
           verdict: tuple[bool, str] | None = None) -> dict[str, Any]:
    """One ``details.citations`` entry; ``supported`` null when the model gave no verdict
    (an id missing from the context, or a failed call)."""
    entry: dict[str, Any] = {"id": citation.id, "claim": citation.claim,
                             "in_context": in_context, "supported": None}
    if verdict is not None:
        entry["supported"], entry["reason"] = verdict
    return entry
