"""The judge engine: one per (transport, model, endpoint) per process, shared by every LLM
judge that uses that model. It bounds concurrency, applies requests- and tokens-per-minute
limits, finds the endpoint's own limits below them (:mod:`evalkit._adaptive`: a 429 slows
and pauses the endpoint, not one call, and is retried for ``rate_limit_budget_s``), retries
other transient failures with exponential backoff and jitter, re-asks when the answer cannot
be parsed, serves and fills the response cache, and accounts tokens, cost and latency for
every call."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from evalkit._adaptive import AdaptiveLimit, StillRefusing
from evalkit._http import backoff_seconds
from evalkit.errors import ConfigError, EvalkitError
from evalkit.judges.llm._cache import ResponseCache, cache_key
from evalkit.judges.llm._cachewriter import cache_writer
from evalkit.judges.llm._parse import ParseError
from evalkit.judges.llm._pricing import call_cost, token_prices
from evalkit.judges.llm._prompt import approx_tokens
from evalkit.judges.llm._ratelimit import TokenBucket
from evalkit.judges.llm._sharedlimit import SharedLimits, limits_dir
from evalkit.judges.llm._transport import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AiohttpTransport,
    CallError,
    Completion,
    LitellmTransport,
)
from evalkit.redact import mask, register_secret, register_url

# providers whose endpoint speaks the OpenAI chat-completions API: default base URL and the
# environment variable holding the key (None: no key needed)
OPENAI_COMPATIBLE: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "ollama": ("http://localhost:11434/v1", None),
    "hosted_vllm": (None, "HOSTED_VLLM_API_KEY"),
    "lm_studio": ("http://localhost:1234/v1", "LM_STUDIO_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "together_ai": ("https://api.together.xyz/v1", "TOGETHERAI_API_KEY"),
}
TRANSPORTS = ("auto", "aiohttp", "litellm")
# request parameters a judge can do without, in groups dropped together when refused (a
# refused json_schema response format is first asked for as json_object)
OPTIONAL_PARAMS = (("response_format",), ("logprobs", "top_logprobs"))
# why a judgment is an error (judgments.error_cause): the call's fault, or the answer's
ERROR_CAUSES = ("rate_limited", "server_error", "timeout", "connection", "client_error",
                "bad_response", "empty_answer", "malformed_answer", "invalid_answer",
                "ambiguous_verdict", "judge_error", "too_large", "non_finite")


@dataclass(frozen=True)
class Endpoint:
    """Where and how a model string is reached."""

    transport: str  # aiohttp or litellm
    model: str  # the litellm model string, as configured
    api_base: str | None  # the configured endpoint (None: the provider's default)
    key_env: str | None  # environment variable holding the API key
    base_url: str | None = None  # aiohttp only: the resolved base URL
    wire_model: str | None = None  # aiohttp only: the model name sent in the request
    anonymous: bool = False  # a self-hosted OpenAI-compatible endpoint: send no provider key

    @property
    def limit_key(self) -> str:
        """What one provider limit is spent by: the model at the configured endpoint, whatever
        the transport (the lean one names the provider's key variable, litellm leaves it
        to its own default: the same key)."""
        return f"{self.model}|{self.api_base}"


def resolve_endpoint(model: str, api_base: str | None, transport: str = "auto",
                     api_key_env: str | None = None) -> Endpoint:
    """Pick the transport for ``model``: aiohttp for OpenAI-compatible providers (and for a
    model without a provider prefix), litellm for every other provider, unless forced."""
    provider, _, rest = model.partition("/")
    if not rest:
        provider, rest = "openai", model
    known = OPENAI_COMPATIBLE.get(provider)
    kind = transport if transport != "auto" else ("aiohttp" if known else "litellm")
    key_env = api_key_env or (known[1] if known else None)
    # a provider's key is never sent to another endpoint unless api_key_env says so
    anonymous = bool(api_base and api_key_env is None and known and known[0] != api_base)
    if kind == "litellm":
        return Endpoint("litellm", model, api_base, api_key_env, anonymous=anonymous)
    base_url = api_base or (known[0] if known else None)
    if base_url is None:
        raise ConfigError(f"model '{model}': the aiohttp transport needs api_base (the "
                          "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1)")
    return Endpoint("aiohttp", model, api_base, None if anonymous else key_env, base_url,
                    rest if known else model, anonymous)


@dataclass(frozen=True)
class CallPolicy:
    """How one judge wants its calls made."""

    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    parse_retries: int = 2
    rate_limit_budget_s: float = 600.0  # how long a call asked to slow down keeps retrying
    cache: ResponseCache | None = None
    cache_refresh: bool = False
    prices: tuple[float, float] | None = None  # USD per (input, output) token; None: the map
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # a larger reply is an error
    repeat: int = 0  # runner.repeats: the cache keys each repeat apart (0: the usual key)


@dataclass
class CallResult:
    """A parsed answer, or the error that prevented one, with its accounting."""

    value: Any = None
    raw: str | None = None
    error: str | None = None
    attempts: int = 0
    latency_s: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cached: bool = False
    cause: str | None = None  # one of ERROR_CAUSES when ``error`` is set
    transient_faults: int = 0  # calls that failed and were retried (429, 5xx, timeouts, ...)
    sent: list[dict[str, Any]] | None = None  # the messages of the last request (or cache key)

    @property
    def ok(self) -> bool:
        return self.error is None


Parser = Callable[[str, "list[dict[str, Any]] | None"], Any]


def _add(a: int | float | None, b: int | float | None) -> Any:
    return None if a is None or b is None else a + b


class Engine:
    """Calls one judge model. Concurrency and rate limits are the tightest asked for by any
    judge sharing the engine."""

    def __init__(self, endpoint: Endpoint, run_id: str = "") -> None:
        self.endpoint = endpoint
        self.run_id = run_id  # the run whose engines share this one's endpoint limit
        self.concurrency = 0
        self.rpm: TokenBucket | None = None
        self.tpm: TokenBucket | None = None
        self._transport: AiohttpTransport | LitellmTransport | None = None
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None
        self._users = 0
        self.unsupported: set[str] = set()  # optional request parameters the endpoint refused
        self._shared: SharedLimits | None = None
        self.adaptive = True
        self._limit: AdaptiveLimit | None = None

    def constrain(self, concurrency: int, rpm: int | None, tpm: int | None,
                  adaptive: bool = True) -> None:
        """Tighten the limits to what a (new) judge asks for (one judge turning the
        adaptive limits off turns them off for the endpoint)."""
        self.concurrency = min(self.concurrency or concurrency, concurrency)
        self.adaptive = self.adaptive and adaptive
        if self._limit is not None:
            self._limit.ceiling = min(self._limit.ceiling, self.concurrency)
            self._limit.window = min(self._limit.window, self.concurrency)
            self._limit.adaptive = self._limit.adaptive and self.adaptive
        if rpm and (self.rpm is None or rpm / 60 < self.rpm.rate):
            self.rpm = TokenBucket(rpm)
        if tpm and (self.tpm is None or tpm / 60 < self.tpm.rate):
            self.tpm = TokenBucket(tpm, burst_s=10.0)  # room for one long prompt

    @property
    def limit(self) -> AdaptiveLimit:
        """The endpoint's adaptive rate and concurrency, below the configured ones: one per
        :attr:`Endpoint.limit_key`, shared by its engines (the lean transport's and litellm's
        calls spend one provider limit; a sweep's processes share it under the same key)."""
        if self._limit is None:
            key = self.endpoint.limit_key
            same = next((e._limit for (other, run_id), e in _ENGINES.items()
                         if e._limit is not None and run_id == self.run_id and
                         other.limit_key == key), None)
            self._limit = same if same is not None else \
                AdaptiveLimit(self.concurrency, self.adaptive)
            self.constrain(self.concurrency, None, None, self.adaptive)
        return self._limit

    def stats(self) -> dict[str, Any]:
        """What the endpoint's limits came to (for the manifest and the summary)."""
        return self.limit.stats()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem = asyncio.Semaphore(self.concurrency)
            self._sem_loop = loop
        return self._sem

    def _transport_for_call(self) -> AiohttpTransport | LitellmTransport:
        if self._transport is None:
            ep = self.endpoint
            key = os.environ.get(ep.key_env) if ep.key_env else None
            # masked wherever they show up, whatever the variable's name
            register_secret(key)
            register_url(ep.api_base)
            if ep.key_env and not key and ep.transport == "aiohttp":
                raise EvalkitError(f"judge model '{ep.model}': environment variable "
                                   f"{ep.key_env} is not set; export it (or set api_key_env "
                                   "to the variable that holds the key)")
            if ep.transport == "aiohttp":
                self._transport = AiohttpTransport(ep.base_url or "", ep.wire_model or "", key)
            else:
                # litellm's OpenAI client insists on a key even for a server that needs none
                self._transport = LitellmTransport(ep.model, ep.api_base,
                                                   "no-key" if ep.anonymous else key)
        return self._transport

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Engine]:
        """Use the engine within one event loop; the last user closes its connections."""
        self._users += 1
        try:
            yield self
        finally:
            self._users -= 1
            if self._users == 0:
                if self._transport is not None:
                    await self._transport.aclose()

    async def complete(self, messages: list[dict[str, Any]], params: dict[str, Any],
                       parse: Parser, policy: CallPolicy) -> CallResult:
        """Ask the model, parse its answer with ``parse`` (which raises :class:`ParseError`
        on a bad answer), and return the parsed value with its accounting. A failed call is
        not raised but returned (``error`` set, no value); only a misconfiguration no retry
        can fix (a missing API key) raises :class:`EvalkitError`."""
        t0 = time.perf_counter()
        key = self._key(messages, params, policy)
        cache = policy.cache
        hit = self.lookup(messages, params, parse, policy, key)
        if hit is not None:
            hit.latency_s = time.perf_counter() - t0
            hit.sent = messages
            return hit
        result = CallResult(input_tokens=0, output_tokens=0, cost_usd=0.0)
        asked = messages
        transient = 0
        slowed = 0
        slowed_since: float | None = None  # the call's first "slow down"
        bad_answers = 0
        while True:
            result.attempts += 1
            result.sent = asked
            sent = self._supported(params)
            failure: CallError | None = None
            bad: ParseError | None = None
            # the call's slot is held until its answer is stored: a run killed at any moment
            # loses at most `concurrency` answers it was given
            async with self._semaphore():
                try:
                    completion = await self._call(asked, sent, policy, None if slowed_since
                                                  is None else slowed_since +
                                                  policy.rate_limit_budget_s)
                except CallError as exc:
                    failure = exc
                else:
                    bad = self._read(completion, result, parse, policy)
                    if bad is None and cache is not None:
                        await cache_writer(cache).put(key, self.endpoint.model, {
                            "text": result.raw, "logprobs": completion.logprobs
                            if result.raw == completion.text else None,
                            "input_tokens": completion.input_tokens,
                            "output_tokens": completion.output_tokens,
                            # what the answer cost when it was bought (re-asks included):
                            # a judgment served from the cache later keeps that cost, so
                            # a resumed run's cost per success equals a clean run's
                            "cost_usd": result.cost_usd})
            if failure is not None:
                exc = failure
                if self._learn_unsupported(exc, sent):
                    continue  # the endpoint refused an optional parameter: ask without it
                if exc.slow_down and slowed_since is None:
                    # the budget runs from the call's first refusal: time it queued behind
                    # other calls (the call slots, the pace) before that was no retrying
                    slowed_since = time.perf_counter()
                if exc.slow_down and \
                        time.perf_counter() - (slowed_since or 0.0) < policy.rate_limit_budget_s:
                    # not the call's fault: the controller slowed or paused the endpoint;
                    # without it (adaptive off, no Retry-After) this call backs off alone
                    result.transient_faults += 1
                    slowed += 1
                    if not self.adaptive and exc.retry_after is None:
                        await asyncio.sleep(self._delay(slowed, None, policy))
                    elif exc.wait_alone:  # its Retry-After, the endpoint not paused for it
                        await asyncio.sleep(exc.wait_alone + random.uniform(0, 0.01))
                    continue
                transient += 1
                if not exc.retryable or exc.slow_down or transient > policy.max_retries:
                    message = mask(str(exc))
                    result.error = message if result.attempts == 1 else \
                        f"{message} (after {result.attempts} attempts)"
                    if exc.slow_down:
                        result.error += (f"; still asked to slow down after "
                                         f"{policy.rate_limit_budget_s:g} s "
                                         "(rate_limit_budget_s)")
                    result.cause = exc.cause
                    break
                result.transient_faults += 1
                await asyncio.sleep(self._delay(transient, exc.retry_after, policy))
                continue
            if bad is not None:
                bad_answers += 1
                if bad_answers > policy.parse_retries:
                    result.error = f"unparseable answer after {bad_answers} tries: {bad}"
                    result.cause = bad.cause
                    break
                asked = [*messages, {"role": "assistant", "content": (result.raw or "")[:4000]},
                         {"role": "user", "content": f"That answer could not be read ({bad}). "
                          "Reply again with only the JSON object asked for."}]
                continue
            break
        result.latency_s = time.perf_counter() - t0
        return result

    def _read(self, completion: Completion, result: CallResult, parse: Parser,
              policy: CallPolicy) -> ParseError | None:
        """Account ``completion`` in ``result`` and parse its answer into ``result.value``;
        the parse error when the answer cannot be read."""
        # a key or URL a server echoes back is masked before the answer is read, kept,
        # cached or shown to the model again (log-probabilities would spell it out)
        text = mask(completion.text)
        logprobs = completion.logprobs if text == completion.text else None
        result.raw = text
        result.input_tokens = _add(result.input_tokens, completion.input_tokens)
        result.output_tokens = _add(result.output_tokens, completion.output_tokens)
        result.cost_usd = _add(result.cost_usd, self._cost(completion, policy))
        try:
            result.value = parse(text, logprobs)
        except ParseError as exc:
            return exc
        return None

    def lookup(self, messages: list[dict[str, Any]], params: dict[str, Any], parse: Parser,
               policy: CallPolicy, key: str | None = None) -> CallResult | None:
        """The cached, parsed answer to this call (no model call), or None."""
        if policy.cache is None or policy.cache_refresh:
            return None
        hit = policy.cache.get(key or self._key(messages, params, policy))
        if hit is None:
            return None
        try:
            value = parse(hit["text"], hit.get("logprobs"))
        except ParseError:
            return None  # the parser changed since: ask again
        # the cost it was bought at; an answer cached before costs were stored: unknown
        return CallResult(value, hit["text"], None, 0, 0.0, hit.get("input_tokens"),
                          hit.get("output_tokens"), hit.get("cost_usd"), cached=True)

    def _key(self, messages: list[dict[str, Any]], params: dict[str, Any],
             policy: CallPolicy) -> str:
        """The cache key of a call: repeat k > 0 of a record is its own entry (the same
        request, asked again), so repeats measure the judge, not the cache."""
        ep = self.endpoint
        keyed = params if not policy.repeat else {**params, "evalkit_repeat": policy.repeat}
        return cache_key(ep.model, ep.api_base, messages, keyed)

    def _supported(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.unsupported:
            return params
        out = {k: v for k, v in params.items() if k not in self.unsupported}
        if "json_schema" in self.unsupported and _format(out) == "json_schema":
            out["response_format"] = {"type": "json_object"}
        return out

    def _learn_unsupported(self, exc: CallError, sent: dict[str, Any]) -> bool:
        """True when a 400 names an optional parameter that was ``sent`` and this endpoint
        does not take (structured output, log-probabilities): later calls leave it out, and
        a refused JSON schema is asked for as a JSON object first. The prompt still asks for
        JSON, and G-Eval falls back to the integer score."""
        if exc.status != 400:
            return False
        text = str(exc).lower()
        if _format(sent) == "json_schema" and ("response_format" in text
                                               or "json_schema" in text):
            self.unsupported.add("json_schema")
            return True
        refused = [group for group in OPTIONAL_PARAMS
                   if any(p in sent for p in group) and any(p in text for p in group)]
        for group in refused:
            self.unsupported.update(group)
        return bool(refused)

    def _shared_limits(self) -> SharedLimits | None:
        """The limits shared with the other processes of a sweep (None outside one)."""
        if self._shared is None and (directory := limits_dir()) is not None:
            self._shared = SharedLimits(directory, self.endpoint.limit_key,
                                        self.concurrency, self.rpm and round(self.rpm.rate * 60),
                                        self.tpm and round(self.tpm.rate * 60))
        return self._shared

    async def _call(self, messages: list[dict[str, Any]], params: dict[str, Any],
                    policy: CallPolicy, budget_end: float | None = None) -> Completion:
        """One call; ``budget_end`` (time.perf_counter()): when the call's budget for being
        refused runs out, if it was refused already."""
        shared = self._shared_limits()
        if shared is None:
            return await self._call_here(messages, params, policy, budget_end)
        # a sweep's processes on this machine: the endpoint's limits hold across them all
        # (the adaptive ones too: a refusal one job sees slows them all)
        transport = self._transport_for_call()
        limit = self.limit
        limit.shared = shared
        async with shared.slot(limit.shared_window):
            reserved = 0
            if shared.rpm:
                await shared.acquire("rpm", 1)
            if shared.tpm:
                reserved = approx_tokens(messages) + int(params.get("max_tokens") or 256)
                await shared.acquire("tpm", reserved)
            completion = await self._send(transport, messages, params, policy, budget_end)
            if shared.tpm and completion.input_tokens is not None:
                used = completion.input_tokens + (completion.output_tokens or 0)
                shared.adjust("tpm", used - reserved)
            return completion

    async def _call_here(self, messages: list[dict[str, Any]], params: dict[str, Any],
                         policy: CallPolicy, budget_end: float | None = None) -> Completion:
        """One call within this process's limits (the caller holds a call slot)."""
        transport = self._transport_for_call()
        reserved = 0
        if self.rpm is not None:
            await self.rpm.acquire(1)
        if self.tpm is not None:
            reserved = approx_tokens(messages) + int(params.get("max_tokens") or 256)
            await self.tpm.acquire(reserved)
        completion = await self._send(transport, messages, params, policy, budget_end)
        if self.tpm is not None and completion.input_tokens is not None:
            used = completion.input_tokens + (completion.output_tokens or 0)
            self.tpm.adjust(used - reserved)
        return completion

    async def _send(self, transport: AiohttpTransport | LitellmTransport,
                    messages: list[dict[str, Any]], params: dict[str, Any],
                    policy: CallPolicy, budget_end: float | None = None) -> Completion:
        """One request, let through by the endpoint's adaptive limits and reported back to
        them."""
        limit = self.limit
        try:
            ticket = limit.try_acquire() or await limit.acquire(
                None if budget_end is None else budget_end - time.perf_counter())
        except StillRefusing as exc:  # (half-open past the call's budget: refused, unsent)
            raise CallError(f"rate limited: {exc}", status=429) from None
        try:
            # both transports enforce the timeout themselves (an outer wait_for costs a task
            # per call, measurable at hundreds of calls per second)
            completion = await transport.complete(messages, params, policy.timeout_s,
                                                  policy.max_response_bytes)
        except CallError as exc:
            if exc.slow_down:
                retry_after = None if exc.retry_after is None else \
                    min(exc.retry_after, policy.max_backoff_s)
                if not limit.refused(ticket, exc.status != 429, retry_after, exc.quotas):
                    exc.wait_alone = retry_after  # (a refusal taken for noise)
            else:
                limit.failed(ticket)
            raise
        except BaseException:
            limit.failed(ticket)
            raise
        used = None if completion.input_tokens is None else \
            completion.input_tokens + (completion.output_tokens or 0)
        limit.ok(ticket, completion.quotas, used)
        return completion

    @staticmethod
    def _delay(attempt: int, retry_after: float | None, policy: CallPolicy) -> float:
        if retry_after is not None:
            # the server said when to come back: never earlier, a little jitter after
            return min(max(retry_after, 0.0), policy.max_backoff_s) + random.uniform(0, 0.1)
        return backoff_seconds(attempt - 1, policy.backoff_s, policy.max_backoff_s)

    def _cost(self, completion: Completion, policy: CallPolicy) -> float | None:
        if policy.prices is not None:
            return call_cost(policy.prices, completion.input_tokens, completion.output_tokens)
        if completion.cost_usd is not None:
            return completion.cost_usd
        return call_cost(token_prices(self.endpoint.model), completion.input_tokens,
                         completion.output_tokens)


def _format(params: dict[str, Any]) -> str | None:
    fmt = params.get("response_format")
    return fmt.get("type") if isinstance(fmt, dict) else None


_ENGINES: dict[tuple[Endpoint, str], Engine] = {}


def get_engine(endpoint: Endpoint, concurrency: int, rpm: int | None = None,
               tpm: int | None = None, run_id: str = "", adaptive: bool = True) -> Engine:
    """The engine for ``endpoint`` shared by the judges of run ``run_id`` in this process
    (the jobs of a sweep run one after another in one process get their own limits), with
    its limits tightened as asked."""
    engine = _ENGINES.get((endpoint, run_id))
    if engine is None:
        engine = _ENGINES[(endpoint, run_id)] = Engine(endpoint, run_id)
    engine.constrain(concurrency, rpm, tpm, adaptive)
    return engine
