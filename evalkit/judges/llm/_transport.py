"""Two ways to reach a judge model, behind one interface (``complete`` and ``aclose``):

- :class:`AiohttpTransport` speaks the OpenAI chat-completions API directly (OpenAI, vLLM,
  Ollama, OpenRouter, most self-hosted judges). Measured here it costs a fraction of the
  client CPU of litellm per call, which is what bounds a judge sweep's throughput.
- :class:`LitellmTransport` goes through ``litellm.acompletion`` for every other provider;
  litellm is imported when a first call needs it, off the event loop.

Both raise :class:`CallError` (status, Retry-After, retryable) and return :class:`Completion`;
retries, rate limits, caching and accounting live in the engine, the same for both."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import gc
import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from evalkit._gc import gc_paused
from evalkit._http import Quota, rate_limit_quotas, retry_after_seconds
from evalkit._log import log_level, quiet_litellm

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
DEFAULT_MAX_RESPONSE_BYTES = 8 << 20  # a judge's reply is a few KB; 8 MiB is plenty
_CHUNK = 64 << 10


def too_large(max_bytes: int, where: str) -> CallError:
    """The error of a reply larger than ``max_bytes``: its own cause, not retried (the same
    question would get the same answer)."""
    return CallError(f"the reply from {where} is larger than {max_bytes:,} bytes "
                     "(max_response_bytes); raise the judge's max_response_bytes if that is "
                     "expected", retryable=False, cause="too_large")


async def _read_capped(resp: Any, max_bytes: int) -> bytes:
    """The body of ``resp``, read a chunk at a time and never more than ``max_bytes``: a
    larger one (by its Content-Length or as it streams) is a :class:`CallError` at once, so
    a huge or endless reply costs at most ``max_bytes`` of memory."""
    where = f"{resp.url.scheme}://{resp.url.host}:{resp.url.port}"
    if resp.content_length is not None and resp.content_length > max_bytes:
        raise too_large(max_bytes, where)
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise too_large(max_bytes, where)
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass
class Completion:
    """One answer from the model."""

    text: str
    input_tokens: int | None
    output_tokens: int | None
    logprobs: list[dict[str, Any]] | None  # OpenAI format: [{token, logprob, top_logprobs}]
    cost_usd: float | None = None  # when the transport knows it (litellm)
    quotas: dict[str, Quota] | None = None  # the provider's rate-limit headers, when sent


class CallError(Exception):
    """A call that did not produce an answer; ``cause`` says why (see ``ERROR_CAUSES``)."""

    def __init__(self, message: str, status: int | None = None,
                 retry_after: float | None = None, retryable: bool = True,
                 cause: str | None = None, quotas: dict[str, Quota] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.retryable = retryable
        self.cause = cause or status_cause(status)
        self.quotas = quotas
        self.wait_alone: float | None = None  # a Retry-After this call waits alone

    @property
    def slow_down(self) -> bool:
        """The endpoint asked to be called less (not a fault of the call): a 429, an
        overload (529), or a 503 saying when to come back."""
        return self.status in (429, 529) or (self.status == 503 and
                                             self.retry_after is not None)


def status_cause(status: int | None) -> str:
    """The error cause of an HTTP status (no status: the connection failed)."""
    if status is None:
        return "connection"
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    return "server_error" if status >= 500 else "client_error"


def _usage(usage: Any) -> tuple[int | None, int | None]:
    if not usage:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    return get("prompt_tokens"), get("completion_tokens")


def chat_url(base_url: str) -> tuple[str, str | None, str]:
    """``{base_url}/chat/completions`` with the base URL's query string kept after the path
    (``https://h/v1?api-version=x`` → ``https://h/v1/chat/completions?api-version=x``), its
    user-info taken out (returned apart, for a Basic header), and the URL to show in errors
    (no user-info, no query)."""
    parts = urlsplit(base_url)
    userinfo, _, host = parts.netloc.rpartition("@")
    path = parts.path.rstrip("/") + "/chat/completions"
    url = urlunsplit((parts.scheme, host, path, parts.query, parts.fragment))
    return url, userinfo or None, urlunsplit((parts.scheme, host, path, "", ""))


class AiohttpTransport:
    """POST ``{base_url}/chat/completions`` with one pooled aiohttp session per event loop."""

    def __init__(self, base_url: str, wire_model: str, api_key: str | None) -> None:
        self.url, userinfo, self.shown_url = chat_url(base_url)
        self.wire_model = wire_model
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        elif userinfo:  # https://user:key@host: the credentials as HTTP Basic auth
            user, _, password = userinfo.partition(":")
            token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            # the runner may start a new event loop per batch; a session cannot outlive its loop
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300))
            self._loop = loop
        return self._session

    async def complete(self, messages: list[dict[str, Any]], params: dict[str, Any],
                       timeout: float, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
                       ) -> Completion:
        import aiohttp

        body = json.dumps({"model": self.wire_model, "messages": messages, **params})
        session = self._session_for_loop()
        try:
            async with session.post(self.url, data=body, headers=self.headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                payload = await _read_capped(resp, max_bytes)
                if resp.status >= 400:
                    text = payload[:300].decode("utf-8", "replace")
                    raise CallError(f"HTTP {resp.status} from {self.shown_url}: {text}",
                                    status=resp.status,
                                    retry_after=retry_after_seconds(resp.headers),
                                    retryable=resp.status in RETRYABLE_STATUS,
                                    quotas=rate_limit_quotas(resp.headers))
                quotas = rate_limit_quotas(resp.headers)
        except asyncio.TimeoutError:
            raise CallError(f"timed out after {timeout:g} s", status=408) from None
        except aiohttp.ClientError as exc:
            raise CallError(f"{type(exc).__name__}: {exc}", cause="connection") from None
        try:
            data = json.loads(payload)
            choice = data["choices"][0]
            text = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise CallError(f"not a chat completion: {payload[:200]!r}",
                            cause="bad_response") from None
        logprobs = (choice.get("logprobs") or {}).get("content")
        input_tokens, output_tokens = _usage(data.get("usage"))
        return Completion(text or "", input_tokens, output_tokens, logprobs, quotas=quotas)

    async def aclose(self) -> None:
        """Close this loop's session (the next call opens a new one)."""
        if self._session is not None and not self._session.closed \
                and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


_litellm: Any = None
_litellm_import: concurrent.futures.Future[Any] | None = None


def import_litellm() -> Any:
    """litellm, imported once, offline and quiet: the bundled price map instead of a download,
    its logging at WARNING and no help banner (unless ``EVALKIT_LOG_LEVEL`` asks for more),
    unsupported parameters dropped per provider."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        level = log_level()  # a bad value fails before the import's seconds, not after
        quiet_litellm(level)
        # the import creates ~0.5 M objects that live as long as the process. The cyclic GC
        # scanning them while they are made costs ~0.5 s of the 3-4 s import, and afterwards
        # 1.0 s of CPU over 1,000 calls (pausing the event loop up to 0.4 s at a time): they
        # are made with it off, then frozen (left out of every later collection; so is what
        # else is alive at that moment, at worst a batch's worth of memory never collected)
        with gc_paused():
            import litellm

            gc.freeze()

        litellm.suppress_debug_info = level > logging.DEBUG  # the help banners
        litellm.drop_params = True
        _litellm = litellm
    return _litellm


async def litellm_module() -> Any:
    """litellm for a call: imported (4-5 s) in a thread of its own, started by the first call
    that needs it, while the event loop goes on serving cached answers and other judges'
    calls instead of stalling (their requests would time out)."""
    global _litellm_import
    if _litellm is not None:
        return _litellm
    if _litellm_import is None:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(import_litellm())
            except BaseException as exc:  # handed to every caller waiting on the import
                future.set_exception(exc)

        _litellm_import = future
        threading.Thread(target=run, name="evalkit-import-litellm", daemon=True).start()
    return await asyncio.wrap_future(_litellm_import)


class LitellmTransport:
    """``litellm.acompletion`` with litellm's own retries off (the engine retries)."""

    def __init__(self, model: str, api_base: str | None, api_key: str | None) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self._schemas: bool | None = None  # whether litellm says the model takes a JSON schema

    def _structured(self, litellm: Any, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with a JSON-schema response format asked as a JSON object for a model
        litellm does not know to take a schema (``supports_response_schema``)."""
        fmt = params.get("response_format")
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return params
        if self._schemas is None:
            try:
                self._schemas = bool(litellm.supports_response_schema(model=self.model))
            except Exception:  # a model litellm cannot map: no schema
                self._schemas = False
        return params if self._schemas else {**params, "response_format": {"type": "json_object"}}

    async def complete(self, messages: list[dict[str, Any]], params: dict[str, Any],
                       timeout: float, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
                       ) -> Completion:
        """(``max_bytes`` is checked on the answer litellm returns: litellm's clients read a
        reply whole, so the aiohttp transport is the one whose memory the cap bounds.)"""
        litellm = await litellm_module()
        params = self._structured(litellm, params)
        extra: dict[str, Any] = {}
        if self.api_base:
            extra["api_base"] = self.api_base
        if self.api_key:
            extra["api_key"] = self.api_key
        try:
            resp = await litellm.acompletion(model=self.model, messages=messages,
                                             timeout=timeout, max_retries=0, **extra, **params)
        except asyncio.TimeoutError:
            raise CallError(f"timed out after {timeout:g} s", status=408) from None
        except Exception as exc:
            raise _call_error(litellm, exc) from None
        if not resp.choices:
            raise CallError("not a chat completion: no choices", cause="bad_response")
        choice = resp.choices[0]
        logprobs = getattr(choice, "logprobs", None)
        if logprobs is not None and not isinstance(logprobs, dict):
            logprobs = logprobs.model_dump() if hasattr(logprobs, "model_dump") else None
        input_tokens, output_tokens = _usage(getattr(resp, "usage", None))
        # litellm prices every response already (None for a model missing from its map)
        hidden = getattr(resp, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        if len((choice.message.content or "").encode()) > max_bytes:
            raise too_large(max_bytes, self.api_base or self.model)
        return Completion(choice.message.content or "", input_tokens, output_tokens,
                          (logprobs or {}).get("content"), cost,
                          rate_limit_quotas(hidden.get("additional_headers")))

    async def aclose(self) -> None:
        """Nothing to close: litellm pools its own clients."""


def _call_error(litellm: Any, exc: Exception) -> CallError:
    status = getattr(exc, "status_code", None)
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None)
    transient = (litellm.Timeout, litellm.APIConnectionError, litellm.InternalServerError,
                 litellm.RateLimitError, litellm.ServiceUnavailableError)
    retryable = status in RETRYABLE_STATUS if isinstance(status, int) else \
        isinstance(exc, transient)
    message = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    status = status if isinstance(status, int) else None
    cause = "timeout" if isinstance(exc, litellm.Timeout) else \
        "rate_limited" if isinstance(exc, litellm.RateLimitError) else \
        "connection" if status is None and isinstance(exc, litellm.APIConnectionError) else \
        None if status is not None else "server_error" if retryable else "client_error"
    return CallError(f"{type(exc).__name__}: {message}", status=status,
                     retry_after=retry_after_seconds(headers), retryable=retryable, cause=cause,
                     quotas=rate_limit_quotas(headers))
