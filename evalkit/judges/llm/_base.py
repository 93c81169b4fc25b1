"""What every LLM judge shares: its config (model, endpoint, limits, retries, cache, prices),
the per-record loop over the engine, skip rules, accounting and dry-run estimates."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import orjson
import pyarrow as pa

from evalkit._gc import full_collections_paused
from evalkit.errors import EvalkitError
from evalkit.judges.llm._cache import response_cache
from evalkit.judges.llm._engine import (
    TRANSPORTS,
    CallPolicy,
    CallResult,
    Engine,
    Parser,
    get_engine,
    resolve_endpoint,
)
from evalkit.judges.llm._feed import gather_fed
from evalkit.judges.llm._pricing import call_cost, token_prices
from evalkit.judges.llm._progress import JudgeProgress
from evalkit.judges.llm._prompt import approx_tokens
from evalkit.judges.llm._sharedlimit import limits_dir, writable_dir
from evalkit.plugin import AsyncJudge
from evalkit.redact import mask
from evalkit.results.schemas import (
    EXCHANGE_CALLS_LIMIT,
    bounded_text,
    json_text,
)

OFFLINE_MODEL = "offline"  # the judge_model of offline stand-in scores
RESPONSE_FORMATS = ("json_schema", "json_object", "none")


@dataclass(frozen=True)
class LlmJudgeConfig:
    model: str = "???"  # any litellm model string: openai/gpt-4o-mini, anthropic/..., ollama/...
    api_base: str | None = None  # endpoint URL (an OpenAI-compatible server, a proxy)
    api_key_env: str | None = None  # env var holding the key; default: the provider's usual one
    transport: str = "auto"  # auto (aiohttp for OpenAI-compatible endpoints), aiohttp, litellm
    concurrency: int = 16  # calls in flight to this model from this process
    rpm: int | None = None  # requests per minute (queued, not rejected)
    tpm: int | None = None  # tokens per minute (estimated before, corrected after each call)
    # below those: find the endpoint's own rate and calls in flight from its 429s and headers
    adaptive: bool = True
    rate_limit_budget_s: float = 600.0  # how long a call asked to slow down (429) retries
    timeout_s: float = 60.0  # per call
    # a reply larger than this is an error (error_cause too_large), read no further
    max_response_bytes: int = 8 << 20
    max_retries: int = 4  # retries of 429/5xx/timeouts/connection errors
    backoff_s: float = 1.0  # first backoff; doubles per retry, with jitter
    max_backoff_s: float = 60.0  # longest wait between retries (Retry-After included)
    parse_retries: int = 2  # re-asks when the answer is not the JSON asked for
    temperature: float = 0.0  # sampling temperature; 0 for the most repeatable verdicts
    max_tokens: int | None = 1024  # per answer
    # json_schema (json_object where the endpoint does not take it), json_object or none
    response_format: str = "json_schema"
    params: dict[str, Any] = field(default_factory=dict)  # extra request parameters (seed, ...)
    cache: bool = True  # serve identical calls from the response cache
    cache_refresh: bool = False  # call again and overwrite cached answers
    input_cost_per_mtok: float | None = None  # USD per million input tokens (self-hosted models)
    output_cost_per_mtok: float | None = None  # USD per million output tokens
    progress: bool = True  # progress bar on a terminal
    # no model call: a deterministic stand-in score seeded from a hash of the judged content,
    # stored with origin 'offline' and marked in the summary (for pipelines without a model)
    offline: bool = False

    # keys that say where, how fast and how patiently calls are made, never what is asked or
    # how the answer is read: left out of judgments.produced_by's config digest, so a new
    # endpoint port or concurrency is not a judge change (and a resume matches a clean run)
    operational: ClassVar[frozenset[str]] = frozenset({
        "api_base", "api_key_env", "transport", "concurrency", "rpm", "tpm", "adaptive",
        "rate_limit_budget_s", "timeout_s", "max_response_bytes", "max_retries", "backoff_s",
        "max_backoff_s", "cache", "cache_refresh", "input_cost_per_mtok",
        "output_cost_per_mtok", "progress"})

    def validate(self) -> None:
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport: {self.transport!r} is not one of "
                             f"{', '.join(TRANSPORTS)}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format: {self.response_format!r} is not one of "
                             f"{', '.join(RESPONSE_FORMATS)}")
        for key in ("concurrency", "timeout_s", "max_response_bytes"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}: must be positive, got {getattr(self, key)}")
        for key in ("max_retries", "parse_retries", "rate_limit_budget_s"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key}: must be 0 or more, got {getattr(self, key)}")
        if (self.input_cost_per_mtok is None) != (self.output_cost_per_mtok is None):
            raise ValueError("input_cost_per_mtok and output_cost_per_mtok: set both or neither")


# config keys that do not change what a judge asks, left out of an offline stand-in's seed
_OPERATIONAL = frozenset(f.name for f in fields(LlmJudgeConfig)) | {"score", "threshold"}


@dataclass(frozen=True)
class Call:
    """One model call a judge makes: what it sends and how it reads the answer."""

    messages: list[dict[str, str]]
    parse: Parser
    schema_name: str  # names the answer in a json_schema request
    schema: dict[str, Any] | None = None  # the answer's JSON schema (response_format json_schema)
    extra: dict[str, Any] = field(default_factory=dict)  # call-specific request parameters


def accounting(record_id: str, results: list[CallResult]) -> dict[str, Any]:
    """The judgment row fields summed over a record's calls: attempts, latency, tokens, cost,
    origin (``cache`` only when every call was served from the cache)."""
    def total(key: str) -> Any:
        values = [getattr(r, key) for r in results]
        return None if any(v is None for v in values) else sum(values)

    return {"record_id": record_id, "attempts": sum(r.attempts for r in results),
            "latency_s": sum(r.latency_s for r in results),
            "input_tokens": total("input_tokens"), "output_tokens": total("output_tokens"),
            "cost_usd": total("cost_usd"),
            "origin": "cache" if results and all(r.cached for r in results) else "computed",
            "exchange": exchange(results)}


def exchange(results: list[CallResult]) -> str | None:
    """The judge's full exchange for a record, size-bounded, as JSON text: per call the
    messages sent (the last attempt's, a re-ask included) and the raw reply, so a judgment
    can be shown and audited (``judgments.exchange``)."""
    calls = [{"messages": [{**m, "content": bounded_text(m.get("content"))}
                           if isinstance(m.get("content"), str) else m for m in r.sent],
              "reply": bounded_text(r.raw), "error": r.error, "cached": r.cached}
             for r in results[:EXCHANGE_CALLS_LIMIT] if r.sent is not None]
    if not calls:
        return None
    out: dict[str, Any] = {"calls": calls}
    if len(results) > EXCHANGE_CALLS_LIMIT:
        out["calls_cut"] = len(results) - EXCHANGE_CALLS_LIMIT
    return json_text(out)


def failed(record_id: str, results: list[CallResult], step: str,
           details: dict[str, Any] | None = None) -> dict[str, Any]:
    """An error judgment for the last (failed) call in ``results``: never a score."""
    last = results[-1]
    return {**accounting(record_id, results), "status": "error", "raw": last.raw,
            "error": f"{step}: {last.error}", "error_cause": last.cause, "details": details}


class LlmJudge(AsyncJudge):
    """Base of the LLM judges: subclasses set ``Config``, ``columns`` and
    ``output_tokens_per_call``, implement ``judge_record`` and ``planned_calls``, and when
    they need them ``skip_reason`` and ``prepare``."""

    Config: ClassVar[type] = LlmJudgeConfig
    columns: ClassVar[tuple[str, ...]] = ("record_id", "input", "output")
    output_tokens_per_call: ClassVar[int] = 200

    def __init__(self, name: str, config: Any, ctx: Any) -> None:
        self.name = name
        self.config = config
        self.ctx = ctx
        self.judge_model = OFFLINE_MODEL if config.offline else config.model
        self.endpoint = None if config.offline else resolve_endpoint(
            config.model, config.api_base, config.transport, config.api_key_env)
        self._engine: Engine | None = None
        prices = None
        if config.input_cost_per_mtok is not None:
            prices = (config.input_cost_per_mtok / 1e6, config.output_cost_per_mtok / 1e6)
        self.prices = prices
        if not config.offline:  # (a bad directory would fail every call alone)
            if (shared := limits_dir()) is not None:
                writable_dir(shared, "EVALKIT_LIMITS_DIR")
            if config.cache:
                writable_dir(Path(ctx.cache_dir).expanduser(),
                             "runner.cache_dir (or EVALKIT_CACHE_DIR)")
        self.policy = CallPolicy(
            timeout_s=config.timeout_s, max_retries=config.max_retries,
            backoff_s=config.backoff_s, max_backoff_s=config.max_backoff_s,
            parse_retries=config.parse_retries, rate_limit_budget_s=config.rate_limit_budget_s,
            cache=response_cache(ctx.cache_dir) if config.cache and not config.offline
            else None,
            cache_refresh=config.cache_refresh, prices=prices,
            max_response_bytes=config.max_response_bytes)

    def prompt_fingerprint(self) -> str:
        """A digest of the messages this judge sends, for a record whose every text is a
        placeholder (``judgments.produced_by``): it changes when the prompt does. A judge
        that cannot build its calls without real content is digested from its module's
        prompt constants and its config's non-operational keys instead."""
        import sys

        probe = {c: "{" + c + "}" for c in self.wanted_columns()}
        probe["context"] = ["{context}"]  # type: ignore[assignment]
        try:
            asked: Any = [c.messages for c in self.planned_calls(probe)]
        except Exception:  # calls that need real content, or steps asked for first (G-Eval):
            # the module's prompt constants and the config's texts stand for the prompt
            module = vars(sys.modules[type(self).__module__])
            asked = [sorted((k, v) for k, v in module.items() if k.isupper()
                            and isinstance(v, str)),
                     {f.name: getattr(self.config, f.name) for f in fields(self.config)
                      if f.name not in _OPERATIONAL}]
        return hashlib.sha256(orjson.dumps(asked, default=str,
                                           option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def uncached(self) -> LlmJudge:
        """A copy of this judge that neither reads nor fills the response cache (an anchor
        set's re-judgment: a cached answer would hide a model changed behind its name)."""
        import copy
        import dataclasses

        twin = copy.copy(self)
        twin.policy = dataclasses.replace(self.policy, cache=None)
        return twin

    def for_repeat(self, repeat: int) -> LlmJudge:
        """This judge as it judges repeat ``repeat`` of each record (``runner.repeats``): a
        copy whose calls the response cache keys apart from the other repeats'."""
        import copy
        import dataclasses

        twin = copy.copy(self)
        twin.policy = dataclasses.replace(self.policy, repeat=repeat)
        return twin

    @property
    def engine(self) -> Engine:
        """The process-wide engine of this judge's model (created on first use)."""
        if self._engine is None:
            cfg = self.config
            self._engine = get_engine(self.endpoint, cfg.concurrency, cfg.rpm, cfg.tpm,
                                      getattr(self.ctx, "run_id", ""), cfg.adaptive)
        return self._engine

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """The engine's adaptive limits (rate settled at, refusals), under the model and the
        endpoint's host (never its path, query or credentials)."""
        if self._engine is None or self.endpoint is None:
            return {}
        host = urlsplit(self.endpoint.api_base or "").hostname
        port = urlsplit(self.endpoint.api_base or "").port if host else None
        where = f" @ {host}{f':{port}' if port else ''}" if host else ""
        return {f"{self.endpoint.model}{where}": self._engine.stats()}

    def params(self, schema_name: str | None = None, schema: dict[str, Any] | None = None,
               **extra: Any) -> dict[str, Any]:
        """Request parameters: sampling, the structured-output request, extra ``params``."""
        cfg = self.config
        out: dict[str, Any] = {"temperature": cfg.temperature}
        if cfg.max_tokens:
            out["max_tokens"] = cfg.max_tokens
        if cfg.response_format == "json_schema" and schema is not None:
            out["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema_name or "answer", "schema": schema}}
        elif cfg.response_format != "none":
            out["response_format"] = {"type": "json_object"}
        out.update(extra)
        out.update(cfg.params)
        return out

    async def ask(self, call: Call) -> CallResult:
        """One engine call with this judge's parameters and policy."""
        return await self.engine.complete(call.messages, self.call_params(call), call.parse,
                                          self.policy)

    def call_params(self, call: Call) -> dict[str, Any]:
        """The request parameters of ``call``."""
        return self.params(call.schema_name, call.schema, **call.extra)

    def cached(self, call: Call) -> CallResult | None:
        """The cached answer to ``call`` if there is one (no model call is made; offline
        mode has no cache)."""
        if self.config.offline:
            return None
        return self.engine.lookup(call.messages, self.call_params(call), call.parse,
                                  self.policy)

    # --- per record -------------------------------------------------------------------

    def skip_reason(self, record: dict[str, Any]) -> str | None:
        """Why ``record`` cannot be judged (e.g. no context to ground against), or None."""
        return None

    async def judge_record(self, record: dict[str, Any]) -> dict[str, Any]:
        """The judgment row for one record."""
        raise NotImplementedError

    def planned_calls(self, record: dict[str, Any]) -> list[Call]:
        """The calls ``record`` needs, as far as they are known before making them (for
        dry-run estimates; a later step whose input is not known yet is approximated)."""
        raise NotImplementedError

    async def prepare(self) -> None:
        """Work done once before the records of a batch (e.g. generating rubric steps)."""

    # --- the plugin protocol ---------------------------------------------------------------

    def wanted_columns(self) -> tuple[str, ...]:
        """The record columns this judge reads."""
        return self.columns

    def _records(self, table: pa.Table) -> list[dict[str, Any]]:
        wanted = dict.fromkeys(self.wanted_columns())
        return table.select([c for c in wanted if c in table.column_names]).to_pylist()

    async def ajudge(self, table: pa.Table) -> list[dict[str, Any]]:
        """Judge every record of ``table`` concurrently (bounded by the engine)."""
        records = self._records(table)
        if self.config.offline:
            return [self._offline(r) for r in records]
        # every record's task is started at once, each a chain of coroutines waiting for a
        # call slot: full collections would traverse them all, over and over, freeing nothing
        async with self.engine.session():
            await self.prepare()
            with JudgeProgress(self.name, len(records), self.config.progress) as bar, \
                    full_collections_paused():
                async def one(record: dict[str, Any]) -> dict[str, Any]:
                    row = await self._judge_safely(record)
                    cached = row.get("origin") == "cache"  # no call, nothing to price
                    bar.advance(row["status"] == "error", 0.0 if cached else row.get("cost_usd"))
                    return row

                return await gather_fed(one(r) for r in records)

    async def _judge_safely(self, record: dict[str, Any]) -> dict[str, Any]:
        reason = self.skip_reason(record)
        if reason is not None:
            return {"record_id": record["record_id"], "status": "skipped",
                    "explanation": reason, "attempts": 0}
        try:
            return await self.judge_record(record)
        except EvalkitError:
            raise
        except Exception as exc:  # a bug on one record costs that record, not the run
            return {"record_id": record["record_id"], "status": "error",
                    "error": mask(f"{type(exc).__name__}: {exc}"), "error_cause": "judge_error"}

    # --- offline mode ----------------------------------------------------------------------

    def offline_value(self, unit: float) -> float:
        """The offline score from ``unit``, a number in [0, 1) drawn from the content's hash
        (a judge whose value is a transform of another's, as hallucination = 1 −
        faithfulness, overrides this so its stand-ins keep that relation)."""
        return unit

    def _offline(self, record: dict[str, Any]) -> dict[str, Any]:
        reason = self.skip_reason(record)
        if reason is not None:
            return {"record_id": record["record_id"], "status": "skipped",
                    "explanation": reason, "attempts": 0, "origin": "offline"}
        # the seed is the plugin, what it asks (its own settings: a rubric, criteria) and
        # what it judges; not the instance name, the model, the endpoint or how the value is
        # reported: the same question on the same content gets the same stand-in in every run
        asked = {f.name: getattr(self.config, f.name) for f in fields(self.config)
                 if f.name not in _OPERATIONAL}
        content = {k: v for k, v in record.items() if k != "record_id"}
        digest = hashlib.sha256(orjson.dumps(
            [type(self).__name__, asked, content], default=str,
            option=orjson.OPT_SORT_KEYS)).hexdigest()
        value = self.offline_value(int(digest[:13], 16) / 16 ** 13)
        return {"record_id": record["record_id"], "status": "ok", "value": value,
                "origin": "offline", "attempts": 0, "input_tokens": 0, "output_tokens": 0,
                "cost_usd": 0.0, "latency_s": 0.0,
                "explanation": "offline mode: a deterministic stand-in score seeded from a hash "
                               "of the judged content; not a judgment",
                "details": {"offline": True, "seed": digest[:16]}}

    def estimate(self, table: pa.Table) -> dict[str, Any]:
        """Calls, tokens and cost this judge would spend on ``table``: the records it would
        not skip, less the calls the response cache already answers. No call is made."""
        return self.tally([c for record in self._records(table)
                           if self.skip_reason(record) is None
                           for c in self.planned_calls(record)])

    def tally(self, planned: list[Call]) -> dict[str, Any]:
        """The estimate for ``planned`` calls (see :meth:`estimate`); none in offline mode."""
        if self.config.offline:
            return {"calls": 0, "cached_calls": 0, "input_tokens": 0, "output_tokens": 0,
                    "cost_usd": 0.0}
        calls = cached = input_tokens = 0
        for call in planned:
            if self.cached(call) is not None:
                cached += 1
                continue
            calls += 1
            input_tokens += approx_tokens(call.messages)
        output_tokens = calls * self.output_tokens_per_call
        cost = call_cost(self.prices or token_prices(self.config.model), input_tokens,
                         output_tokens)
        return {"calls": calls, "cached_calls": cached, "input_tokens": input_tokens,
                "output_tokens": output_tokens, "cost_usd": cost}
