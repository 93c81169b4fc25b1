"""``pairwise``: which of two outputs for the same input is better? Each record is judged
twice with the two outputs in swapped positions; the verdicts are combined, and when the two
orders disagree the record is labelled ``inconsistent`` (the judge's position bias is data).

The two outputs are two columns of one record (``candidate: output``, ``baseline:
final_output`` or ``reference``), or, with ``pair_by``, the outputs of two models' records
that share a column (``pair_by: input``, ``candidate_model``, ``baseline_model``): the
judgment lands on the candidate's record and the baseline's records are skipped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._parse import choice, parse_json_object
from evalkit.results.schemas import RECORDS

__all__ = [
    "FORMAT", "PREFERENCE", "SCHEMA", "TASK", "TEXT_COLUMNS", "PairwiseConfig", "PairwiseJudge",
]

TEXT_COLUMNS = tuple(f.name for f in RECORDS if f.type == "string")
TASK = (
    "You compare two AI responses to the same input and decide which is better on the "
    "criteria below. Judge the content only: ignore which response comes first and their "
    "length unless the criteria ask for it. Answer tie only when neither is better."
    "\n\nCriteria: {criteria}"
)
FORMAT = '{"reasoning": "<one or two sentences>", "winner": "<A, B or tie>"}'
SCHEMA = P.object_schema(reasoning={"type": "string"}, winner={"enum": ["A", "B", "tie"]})
PREFERENCE = {"candidate": 1.0, "tie": 0.5, "baseline": 0.0}


@dataclass(frozen=True)
class PairwiseConfig(LlmJudgeConfig):
    candidate: str = "output"  # record column holding the output under evaluation
    baseline: str = "reference"  # record column holding the output it is compared with
    # what "better" means; it goes into the prompt
    criteria: str = "which response fulfils the input better: correct, complete, helpful"
    pair_by: str | None = None  # pair two models' records sharing this column (e.g. input)
    candidate_model: str | None = None  # with pair_by: the model under evaluation
    baseline_model: str | None = None  # with pair_by: the model it is compared with

    def validate(self) -> None:
        super().validate()
        if self.pair_by is not None:
            if self.pair_by not in TEXT_COLUMNS:
                raise ValueError(f"pair_by: '{self.pair_by}' is not a text record column; "
                                 f"choose from {', '.join(TEXT_COLUMNS)}")
            if not self.candidate_model or not self.baseline_model \
                    or self.candidate_model == self.baseline_model:
                raise ValueError("pair_by needs candidate_model and baseline_model, two "
                                 "different values of the records' model column")
            return
        for key in ("candidate", "baseline"):
            if getattr(self, key) not in TEXT_COLUMNS:
                raise ValueError(f"{key}: '{getattr(self, key)}' is not a text record column; "
                                 f"choose from {', '.join(TEXT_COLUMNS)}")
        if self.candidate == self.baseline:
            raise ValueError("candidate and baseline: must be different columns")


def _parse(text: str, logprobs: Any) -> tuple[str, str]:
    obj = parse_json_object(text, ("winner",))
    return choice(obj, "winner", ("a", "b", "tie")), str(obj.get("reasoning", ""))


class PairwiseJudge(LlmJudge):
    """value: the candidate's preference averaged over both orders (1: candidate better in
    both, 0: baseline better in both, 0.5: tie or disagreement); label ``candidate``,
    ``baseline``, ``tie`` or ``inconsistent``; ``passed`` when the candidate wins."""

    Config = PairwiseConfig
    output_tokens_per_call = 80

    def wanted_columns(self) -> tuple[str, ...]:
        cfg = self.config
        if cfg.pair_by is not None:
            return ("record_id", "input", "model", "output", cfg.pair_by)
        return ("record_id", "input", cfg.candidate, cfg.baseline)

    def _records(self, table: Any) -> list[dict[str, Any]]:
        """Records with the two outputs to compare attached (``_candidate``, ``_baseline``)."""
        rows = super()._records(table)
        cfg = self.config
        if cfg.pair_by is None:
            for row in rows:
                row["_candidate"], row["_baseline"] = row.get(cfg.candidate), row.get(
                    cfg.baseline)
            return rows
        baselines: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row.get("model") == cfg.baseline_model and row.get(cfg.pair_by) is not None:
                baselines.setdefault(row[cfg.pair_by], row)
        for row in rows:
            row["_candidate"] = row.get("output")
            if row.get("model") == cfg.candidate_model:
                base = baselines.get(row.get(cfg.pair_by))
                row["_baseline"] = base["output"] if base else None
                row["_baseline_id"] = base["record_id"] if base else None
        return rows

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        cfg = self.config
        if cfg.pair_by is not None:
            model = record.get("model")
            if model == cfg.baseline_model:
                return "the baseline side of a pairwise comparison (judged on the " \
                       f"{cfg.candidate_model} record)"
            if model != cfg.candidate_model:
                return f"model {model!r} is neither candidate_model nor baseline_model"
            if record.get("_baseline_id") is None:
                return f"no {cfg.baseline_model} record with the same {cfg.pair_by} in " \
                       "this batch"
        for side in ("candidate", "baseline"):
            if not (record.get(f"_{side}") or "").strip():
                return f"no {side} output to compare (it is empty)"
        return None

    def messages(self, record: dict[str, Any], candidate_first: bool) -> list[dict[str, str]]:
        a, b = record["_candidate"], record["_baseline"]
        if not candidate_first:
            a, b = b, a
        return P.messages(P.system(TASK.format(criteria=self.config.criteria), FORMAT),
                          P.block("input", record.get("input")),
                          P.block("response_a", a), P.block("response_b", b))

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        return [Call(self.messages(record, first), _parse, "preference", SCHEMA)
                for first in (True, False)]

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        results = []
        for call, candidate_first in zip(self.planned_calls(record), (True, False),
                                         strict=True):
            result = await self.ask(call)
            results.append(result)
            if not result.ok:
                order = "candidate first" if candidate_first else "baseline first"
                return failed(rid, results, f"comparison ({order})")
        verdicts = []
        for result, candidate_first in zip(results, (True, False), strict=True):
            winner = result.value[0]
            if winner == "tie":
                verdicts.append("tie")
            else:
                verdicts.append("candidate" if (winner == "a") == candidate_first
                                else "baseline")
        agree = verdicts[0] == verdicts[1]
        value = (PREFERENCE[verdicts[0]] + PREFERENCE[verdicts[1]]) / 2
        bias = None
        if not agree and "tie" not in verdicts:
            # the same position won both times: the judge prefers that slot, not an output
            bias = "first position" if results[0].value[0] == "a" else "second position"
        return {**accounting(rid, results), "status": "ok", "value": value,
                "label": verdicts[0] if agree else "inconsistent", "passed": value > 0.5,
                "explanation": results[0].value[1], "raw": results[1].raw,
                "details": {"candidate_first": {"winner": verdicts[0],
                                                "reasoning": results[0].value[1]},
                            "baseline_first": {"winner": verdicts[1],
                                               "reasoning": results[1].value[1]},
                            "orders_agree": agree, "position_bias": bias,
                            "baseline_record_id": record.get("_baseline_id")}}
