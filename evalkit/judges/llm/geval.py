"""``geval``: G-Eval (Liu et al., 2023). A rubric (criteria plus evaluation steps, the steps
given or generated once per rubric and cached) is scored from 1 to 5 and normalised to 0-1 as
(s − 1) / 4. When the provider returns log-probabilities the score is the probability-weighted
mean over 1-5, as in the paper; otherwise it is the integer the judge wrote.

Built-in rubrics: ``relevance``, ``coherence``. A user rubric is a YAML file with ``name``,
``criteria``, optional ``steps`` and optional ``inputs`` (record columns shown to the judge)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from evalkit.checks import check_unit_interval
from evalkit.judges.llm import _prompt as P
from evalkit.judges.llm._base import Call, LlmJudge, LlmJudgeConfig, accounting, failed
from evalkit.judges.llm._engine import CallResult
from evalkit.judges.llm._parse import ParseError, number, parse_json_object, require

__all__ = [
    "BUILT_IN", "SCORE_FORMAT", "SCORE_SCHEMA", "SHOWABLE", "STEPS_FORMAT", "STEPS_SCHEMA",
    "STEPS_TASK", "GEvalConfig", "GEvalJudge", "load_rubric", "Rubric", "weighted_score",
]

BUILT_IN = ("relevance", "coherence")
SHOWABLE = ("input", "output", "context", "reference", "final_output")
STEPS_TASK = (
    "You design evaluation procedures. Given evaluation criteria for scoring an AI output on "
    "a 1-5 scale, write 3 to 6 concise, concrete evaluation steps that a careful grader "
    "follows to apply the criteria."
)
STEPS_FORMAT = '{"steps": ["<step 1>", "<step 2>", "..."]}'
STEPS_SCHEMA = P.object_schema(steps={"type": "array", "items": {"type": "string"}})
SCORE_FORMAT = '{"score": <an integer from 1 to 5>, "reason": "<one or two sentences>"}'
SCORE_SCHEMA = P.object_schema(score={"type": "integer", "enum": [1, 2, 3, 4, 5]},
                               reason={"type": "string"})


@dataclass(frozen=True)
class Rubric:
    """What G-Eval scores."""

    name: str
    criteria: str
    steps: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ("input", "output")


def load_rubric(ref: str) -> Rubric:
    """A built-in rubric by name, or a rubric YAML file by path; ValueError naming the fix."""
    if ref in BUILT_IN:
        text = (resources.files("evalkit.judges.llm") / "rubrics" / f"{ref}.yaml").read_text()
        where = f"built-in rubric '{ref}'"
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            raise ValueError(f"rubric: '{ref}' is neither a built-in rubric "
                             f"({', '.join(BUILT_IN)}) nor a YAML file (working directory "
                             f"{Path.cwd()})")
        text, where = path.read_text(encoding="utf-8"), str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"rubric: {where} is not valid YAML: {str(exc).splitlines()[0]}")\
            from None
    if not isinstance(data, dict) or not isinstance(data.get("criteria"), str):
        raise ValueError(f"rubric: {where} needs a 'criteria:' text (and optional name, "
                         "steps, inputs)")
    unknown = set(data) - {"name", "criteria", "steps", "inputs"}
    if unknown:
        raise ValueError(f"rubric: {where} has unknown key(s) {sorted(unknown)}; "
                         "valid: name, criteria, steps, inputs")
    steps = data.get("steps") or []
    inputs = data.get("inputs") or ["input", "output"]
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        raise ValueError(f"rubric: {where}: 'steps' must be a list of strings")
    _check_inputs(inputs, f"rubric: {where}: inputs")
    return Rubric(str(data.get("name") or Path(ref).stem), data["criteria"].strip(),
                  tuple(steps), tuple(inputs))


def _check_inputs(inputs: Any, where: str) -> None:
    if not isinstance(inputs, list) or not inputs:
        raise ValueError(f"{where}: must be a non-empty list of record columns")
    for col in inputs:
        if col not in SHOWABLE:
            raise ValueError(f"{where}: '{col}' cannot be shown to the judge; choose from "
                             f"{', '.join(SHOWABLE)}")


@dataclass(frozen=True)
class GEvalConfig(LlmJudgeConfig):
    rubric: str = "relevance"  # built-in rubric (relevance, coherence) or a rubric YAML path
    criteria: str | None = None  # inline criteria; replaces the rubric's
    name: str | None = None  # rubric name for inline criteria (default: the judge's name)
    steps: list[str] = field(default_factory=list)  # evaluation steps; generated when empty
    inputs: list[str] = field(default_factory=list)  # record columns shown; default the rubric's
    logprobs: bool = True  # ask for log-probabilities for the probability-weighted score
    top_logprobs: int = 5  # alternatives per token (5 covers the scores 1-5)
    threshold: float = 0.5  # passed when the normalised score is at least this

    def validate(self) -> None:
        super().validate()
        if self.criteria is None:
            load_rubric(self.rubric)
        if self.inputs:
            _check_inputs(list(self.inputs), "inputs")
        check_unit_interval(self.threshold, "threshold")


def weighted_score(logprobs: list[dict[str, Any]] | None) -> float | None:
    """The probability-weighted 1-5 score from the log-probabilities of the token holding
    the ``score`` value, or None when it cannot be found; a non-finite logprob is a
    :class:`ParseError` (the answer is an error, never a NaN score)."""
    if not logprobs:
        return None
    seen = ""
    for token in logprobs:
        text = str(token.get("token", ""))
        key_at = seen.rfind('"score"')
        if key_at != -1 and ":" in seen[key_at:] and text.strip(' "'):  # "4" may be quoted
            if text.strip() not in {"1", "2", "3", "4", "5"}:
                return None
            probs = {s: 0.0 for s in range(1, 6)}
            for alt in token.get("top_logprobs") or [token]:
                digit = str(alt.get("token", "")).strip()
                if digit in {"1", "2", "3", "4", "5"}:
                    logprob = float(alt["logprob"])
                    if not math.isfinite(logprob):  # NaN, ±Infinity: never a probability
                        raise ParseError(f"the logprob of score {digit} is {logprob}, not a "
                                         "finite number")
                    probs[int(digit)] += math.exp(logprob)
            total = sum(probs.values())
            return sum(s * p for s, p in probs.items()) / total if total else None
        seen += text
    return None


def _parse_score(text: str, logprobs: Any) -> tuple[int, float | None, str]:
    obj = parse_json_object(text, ("score",))
    score = number(obj, "score", 1, 5)
    if score != int(score):
        raise ParseError(f"'score' is {score}, expected an integer from 1 to 5")
    return int(score), weighted_score(logprobs), str(obj.get("reason", ""))


def _parse_steps(text: str, logprobs: Any) -> list[str]:
    steps = require(parse_json_object(text, ("steps",)), "steps", list)
    steps = [s.strip() for s in steps if isinstance(s, str) and s.strip()]
    if not steps:
        raise ParseError("'steps' is empty")
    return steps


class GEvalJudge(LlmJudge):
    """value: the normalised score (s − 1) / 4 in [0, 1]; label the integer score."""

    Config = GEvalConfig
    output_tokens_per_call = 80

    def __init__(self, name: str, config: GEvalConfig, ctx: Any) -> None:
        super().__init__(name, config, ctx)
        if config.criteria is not None:
            base = Rubric(config.name or name, config.criteria.strip())
        else:
            base = load_rubric(config.rubric)
        self.rubric = Rubric(base.name, base.criteria,
                             tuple(config.steps) or base.steps,
                             tuple(config.inputs) or base.inputs)
        self._steps: tuple[str, ...] = self.rubric.steps
        self._generation: CallResult | None = None  # billed to the first judgment after it
        self._steps_error: str | None = None
        self._steps_cause: str | None = None

    def wanted_columns(self) -> tuple[str, ...]:
        return ("record_id", *self.rubric.inputs)

    def steps_call(self) -> Call:
        messages = P.messages(P.system(STEPS_TASK, STEPS_FORMAT),
                              f"<criteria>\n{P.escape(self.rubric.criteria)}\n</criteria>")
        return Call(messages, _parse_steps, "steps", STEPS_SCHEMA)

    def score_call(self, record: dict[str, Any], steps: tuple[str, ...]) -> Call:
        listed = "\n".join(f"{i}. {s}" for i, s in enumerate(steps or ("…",), 1))
        task = (f"You are a careful grader. Score the AI output on the criteria below, from 1 "
                f"(worst) to 5 (best), following the evaluation steps.\n\nCriteria:\n"
                f"{self.rubric.criteria}\n\nEvaluation steps:\n{listed}")
        blocks = [P.context_block(record.get("context") or [], 20) if col == "context"
                  else P.block(col, record.get(col)) for col in self.rubric.inputs]
        extra = {"logprobs": True, "top_logprobs": self.config.top_logprobs} \
            if self.config.logprobs else {}
        return Call(P.messages(P.system(task, SCORE_FORMAT), *blocks), _parse_score, "score",
                    SCORE_SCHEMA, extra)

    def estimate(self, table: Any) -> dict[str, Any]:
        steps = self._steps
        planned = []
        if not steps:  # the one-off generation of the steps, unless it is cached
            generation = self.steps_call()
            known = self.cached(generation)
            steps = tuple(known.value) if known is not None else ()
            planned.append(generation)
        planned += [self.score_call(r, steps) for r in self._records(table)]
        return self.tally(planned)

    async def prepare(self) -> None:
        if self._steps:
            return
        result = await self.ask(self.steps_call())
        self._generation = result
        if result.ok:
            self._steps = tuple(result.value)
        else:
            self._steps_error = result.error
            self._steps_cause = result.cause

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        rid = record["record_id"]
        billed = [self._generation] if self._generation is not None else []
        self._generation = None
        if not self._steps:
            return {**accounting(rid, billed), "status": "error",
                    "raw": billed[0].raw if billed else None,
                    "error": f"generating the rubric's evaluation steps: {self._steps_error}",
                    "error_cause": self._steps_cause}
        result = await self.ask(self.score_call(record, self._steps))
        if not result.ok:
            return failed(rid, [*billed, result], "score")
        score, weighted, reason = result.value
        used = weighted if weighted is not None else float(score)
        value = (used - 1) / 4
        return {**accounting(rid, [*billed, result]), "status": "ok", "value": value,
                "label": str(score), "passed": value >= self.config.threshold,
                "explanation": reason, "raw": result.raw,
                "details": {"rubric": self.rubric.name, "score": score,
                            "weighted_score": weighted, "steps": list(self._steps),
                            "steps_generated": not self.rubric.steps}}
