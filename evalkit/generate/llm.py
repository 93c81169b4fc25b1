"""``generate: {plugin: llm, model: ...}``: the candidate's output for each record, from a
model reached through the LLM judges' engine (litellm model strings or the lean OpenAI
transport; response cache, limits, retries, cost accounting, dry-run pricing).

The request: the recorded message list replayed (``metadata.input_messages``, which the
sources keep when a record's input was a message list, or an input that is a message list's
JSON text), as OpenAI chat messages whatever shape it was recorded in
(:mod:`evalkit.generate.messages`); else the input as one user message;
or a ``template`` over the record's columns; ``system_prompt`` replaces the recorded system
message; ``tools`` are sent as the request's tool definitions. ``offline: true`` calls no
model: each candidate is a deterministic stand-in text seeded from a hash of the request
(most answer, some echo the prompt, some refuse), marked as such in its metadata."""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from evalkit.analysis.metadata import metadata_object
from evalkit.generate.messages import UNREPLAYABLE, openai_messages, system_text
from evalkit.plugin import Call, Generator, LlmJudge, LlmJudgeConfig
from evalkit.sources._chat import messages_of

__all__ = ["LlmGenerator"]

_SIDES = ("both", "candidate")
_TEMPLATE_FIELDS = ("input", "output", "context", "reference", "model", "record_id",
                    "session_id", "metadata")


@dataclass(frozen=True)
class LlmGeneratorConfig(LlmJudgeConfig):
    # the candidate's request: null replays the recorded messages (or the input as one user
    # message); else a template over record columns, e.g. "Answer briefly: {input}"
    template: str | None = None
    system_prompt: str | None = None  # replaces the recorded system message (null: keep it)
    tools: list[Any] | None = None  # tool definitions sent with each request (OpenAI format)
    response_format: str = "none"  # the candidate answers in free text
    temperature: float = 0.0
    # replay the records the pipeline_failure filter set aside too: would the candidate have
    # succeeded where production failed? (metric: failure_recovery)
    replay_failed: bool = False
    judge_sides: str = "both"  # both: judge recorded and candidate records; candidate: only it

    def validate(self) -> None:
        super().validate()
        if self.judge_sides not in _SIDES:
            raise ValueError(f"judge_sides: {self.judge_sides!r} is not one of "
                             f"{', '.join(_SIDES)}")
        if self.template is not None:
            try:
                names = [f for _, f, _, _ in string.Formatter().parse(self.template) if f]
            except ValueError as exc:
                raise ValueError(f"template: {exc}; write a literal brace as {{{{ or }}}}") \
                    from None
            bad = [n for n in names if n.split(".")[0].split("[")[0] not in _TEMPLATE_FIELDS]
            if bad:
                raise ValueError(f"template: {{{bad[0]}}} is not a record column; use "
                                 f"{', '.join('{' + f + '}' for f in _TEMPLATE_FIELDS)}")


class _Fields(dict):
    """A record as ``str.format`` reads it: lists joined by blank lines, null as ''."""

    def __missing__(self, key: str) -> str:
        return ""


def request_messages(config: LlmGeneratorConfig, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages the candidate is sent for ``record``."""
    if config.template is not None:
        fields = _Fields({k: ("\n\n".join(v) if isinstance(v, list) else "" if v is None else v)
                          for k, v in record.items() if k in _TEMPLATE_FIELDS})
        fields["metadata"] = metadata_object(record.get("metadata")) or {}
        messages = [{"role": "user", "content": config.template.format_map(fields)}]
    else:
        meta = metadata_object(record.get("metadata")) or {}
        # the list the source kept, else an input that is a message list's JSON text (a
        # message list left unmapped, or read with chat_messages: raw)
        recorded = messages_of(meta.get("input_messages")) or messages_of(record.get("input"))
        if recorded:
            messages = openai_messages(recorded, system_text(meta.get("system_instructions")))
            while messages and messages[-1]["role"] == "assistant":  # (the recorded answer)
                messages.pop()
        elif record.get("input"):
            messages = [{"role": "user", "content": record["input"]}]
        else:  # (a trace recorded without its content: nothing to ask the candidate)
            raise ValueError("the record has no input to replay (no message list and an "
                             "empty input: was the trace recorded without its content?)")
    if config.system_prompt is not None:
        messages = [{"role": "system", "content": config.system_prompt},
                    *(m for m in messages if m.get("role") != "system")]
    return messages


def _text(answer: str, logprobs: Any) -> str:
    return answer


def offline_text(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """A deterministic stand-in answer to ``messages`` and its seed: 80% answer, 10% echo
    the last user message, 10% refuse."""
    digest = hashlib.sha256(orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)).hexdigest()
    unit = int(digest[:13], 16) / 16 ** 13
    last = next((str(m.get("content") or "") for m in reversed(messages)
                 if m.get("role") == "user"), "")
    if unit < 0.1:
        return last, digest[:16]
    if unit < 0.2:
        return "I'm sorry, but I can't help with that request.", digest[:16]
    topic = " ".join(last.split()[:8]).rstrip(".?!") or "this"
    return (f"Here is a short answer on {topic}: the key points are covered in order, with "
            f"the caveats that apply (offline candidate {digest[:6]}).", digest[:16])


class _Caller(LlmJudge):
    """The judge engine's machinery (engine, policy, concurrency, dry-run tally), asked for
    free text: one call per record, its answer the candidate's output."""

    Config = LlmGeneratorConfig
    columns = ("record_id", "input", "output", "context", "reference", "model", "session_id",
               "metadata")
    output_tokens_per_call = 400

    def call(self, record: dict[str, Any]) -> Call:
        return Call(request_messages(self.config, record), _text, "answer",
                    extra={"tools": self.config.tools} if self.config.tools else {})

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        try:
            return [self.call(record)]
        except ValueError:  # (no call will be made: the run says why)
            return []

    def _unreplayable(self, record: dict[str, Any], exc: ValueError) -> dict[str, Any]:
        return {"record_id": record["record_id"], "output": None, "model": self.config.model,
                "status": "error", "error": f"nothing replayable: {exc}",
                "details": {"cause": UNREPLAYABLE}}

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        try:
            call = self.call(record)
        except ValueError as exc:
            return self._unreplayable(record, exc)
        result = await self.ask(call)
        row = {"record_id": record["record_id"], "model": self.config.model,
               "latency_s": result.latency_s, "cost_usd": result.cost_usd,
               "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
               "details": {"attempts": result.attempts, "cached": result.cached}}
        if not result.ok:
            return {**row, "output": None, "status": "error", "error": result.error,
                    "details": {**row["details"], "cause": result.cause}}
        return {**row, "output": result.raw, "status": "ok"}

    def offline_row(self, record: dict[str, Any]) -> dict[str, Any]:
        try:
            text, seed = offline_text(request_messages(self.config, record))
        except ValueError as exc:
            return self._unreplayable(record, exc)
        # no call: no latency to report (null, not 0), nothing spent
        return {"record_id": record["record_id"], "output": text, "model": "offline",
                "latency_s": None, "cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0,
                "status": "ok", "details": {"offline": True, "seed": seed}}


class LlmGenerator(Generator):
    """The candidate's output from a model (or, offline, a seeded stand-in)."""

    Config = LlmGeneratorConfig

    def __init__(self, name: str, config: Any, ctx: Any) -> None:
        super().__init__(name, config, ctx)
        # its own engine (not the judges'): the generator runs on the run's thread while a
        # batch may be judged on another, and an engine belongs to one event loop at a time
        self.caller = _Caller(name, config, _Context(ctx))

    async def agenerate(self, records: pa.Table) -> list[dict[str, Any]]:
        if self.config.offline:
            return [self.caller.offline_row(r) for r in self.caller._records(records)]
        rows = await self.caller.ajudge(records)
        return [{k: v for k, v in row.items() if k not in ("status", "error_cause")}
                | ({"error": row.get("error") or "no output"} if row.get("status") != "ok"
                   else {}) for row in rows]

    def estimate(self, records: pa.Table) -> dict[str, Any]:
        return self.caller.estimate(records)

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        return self.caller.endpoint_stats()

    def close(self) -> None:
        self.caller.close()


class _Context:
    """The run's context with its own engine key (see :class:`LlmGenerator`)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.run_id = f"{getattr(ctx, 'run_id', '')}/generate"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)
