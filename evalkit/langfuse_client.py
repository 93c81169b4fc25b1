"""An async HTTP client for Langfuse's public API, shared by the ``langfuse`` source and sink:
Basic auth from the environment, bounded concurrency, the API's 429s slowing and pausing the
whole client (:mod:`evalkit._adaptive`, as a judge endpoint's) and retried for a time
budget, other failures retried with backoff, and typed errors for the answers a reader must
act on (404: the endpoint or object is not there; 422: the query was too heavy).

It runs on aiohttp, whose C HTTP parser reads a page of 1,000 observations (about 1 MB) for a
quarter of the CPU httpx spends on it: a read of many pages is bound by the client's CPU."""

from __future__ import annotations

import asyncio
import base64
import json as jsonlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from evalkit._adaptive import AdaptiveLimit, StillRefusing
from evalkit._http import backoff_seconds, rate_limit_quotas, retry_after_seconds
from evalkit.errors import SourceError

__all__ = [
    "HOST_ENV", "PUBLIC_KEY_ENV", "SECRET_KEY_ENV", "AuthError", "ClientStats", "credentials",
    "LangfuseClient", "NotFound", "NotJson", "refuse_keys_in_config", "resolve_host",
    "TooHeavy", "parse_body",
]

PUBLIC_KEY_ENV = "LANGFUSE_PUBLIC_KEY"
SECRET_KEY_ENV = "LANGFUSE_SECRET_KEY"
HOST_ENV = "LANGFUSE_HOST"

# 524 is Cloudflare's proxy timeout in front of Langfuse Cloud
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 524})
_MAX_BACKOFF_S = 30.0
# aiohttp stops reading a response once 2 x read_bufsize bytes wait in its buffer (64 KiB by
# default) and resumes when the reader takes them: a 1 MB page went through ~16 such pauses.
# A page of 1,000 observations then arrives without one.
_READ_BUFSIZE = 2 << 20


class NotFound(Exception):
    """404: the endpoint does not exist on this server generation, or the object does not."""


class AuthError(SourceError):
    """401/403: the keys are wrong for this host, or lack access."""


class NotJson(Exception):
    """A success whose body is not JSON: a proxy's or login page, a cut connection."""


def parse_body(body: bytes, where: str) -> Any:
    """``body`` parsed; :class:`NotJson` naming ``where`` and the body's start when it is not
    JSON (orjson's own error names neither)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise NotJson(f"{where}: the answer is not JSON ({_body(body) or 'empty'}); check "
                      "the host (a proxy or login page answers there?)") from None


class TooHeavy(Exception):
    """422: the server gave up on the query (ClickHouse resource limit); ask for less."""


@dataclass
class ClientStats:
    """What the client did, for the manifest."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    too_heavy: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    limits: AdaptiveLimit | None = None  # the rate and calls in flight the API settled at

    def as_dict(self) -> dict[str, Any]:
        settled = self.limits.stats() if self.limits is not None else {}
        return {"requests": self.requests, "retries": self.retries,
                "rate_limited": self.rate_limited, "too_heavy": self.too_heavy,
                "by_status": dict(sorted(self.by_status.items())),
                "rate_per_s": settled.get("rate_per_s"), "paused_s": settled.get("paused_s")}


def credentials() -> tuple[str, str]:
    """(public key, secret key) from the environment; the config never holds them."""
    public, secret = os.environ.get(PUBLIC_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    if not public or not secret:
        missing = [n for n, v in ((PUBLIC_KEY_ENV, public), (SECRET_KEY_ENV, secret)) if not v]
        raise SourceError(f"langfuse: {' and '.join(missing)} not set; export the project's API "
                          "keys (Langfuse → Settings → API keys) before running")
    return public, secret


def resolve_host(host: str | None) -> str:
    """The configured host, else ``$LANGFUSE_HOST``; without a trailing slash."""
    value = host or os.environ.get(HOST_ENV)
    if not value:
        raise SourceError(f"langfuse: no host; set {HOST_ENV} or the config key host "
                          "(e.g. https://cloud.langfuse.com)")
    if not value.startswith(("http://", "https://")):
        raise SourceError(f"langfuse: host {value!r} needs a scheme (https://...)")
    return value.rstrip("/")


def refuse_keys_in_config(public_key: str | None, secret_key: str | None) -> None:
    """For a Config's ``validate``: Langfuse keys come from the environment only, never from
    a config (which is saved with every run)."""
    if public_key is not None or secret_key is not None:
        raise ValueError("public_key/secret_key: keys are never read from a config (it is "
                         "saved with every run); remove them and export "
                         "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY instead")


class LangfuseClient:
    """One connection pool to one Langfuse host. ``concurrency`` bounds requests in flight
    across every caller. A 429 (or a 503 with ``Retry-After``) slows every caller: the
    client paces itself at what the API accepted and pauses for ``Retry-After``, and the
    request is retried for ``rate_limit_budget_s``. 5xx, 524 and transport errors are retried
    up to ``max_retries`` times, waiting ``Retry-After`` when the server sends it and an
    exponential backoff with jitter otherwise."""

    def __init__(self, host: str, concurrency: int = 8, timeout_s: float = 60.0,
                 max_retries: int = 6, backoff_s: float = 0.5,
                 rate_limit_budget_s: float = 600.0) -> None:
        self.host = host
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.rate_limit_budget_s = rate_limit_budget_s
        self.limits = AdaptiveLimit(concurrency)
        self.stats = ClientStats(limits=self.limits)
        self._semaphore = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s,
                                              sock_read=timeout_s)
        basic = base64.b64encode(":".join(credentials()).encode()).decode()
        self._headers = {"Authorization": f"Basic {basic}", "User-Agent": "evalkit"}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> LangfuseClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def get(self, path: str, params: dict[str, Any] | None = None,
                  raw: bool = False) -> Any:
        """GET ``path`` and return the parsed JSON body (``raw``: its bytes, for a caller
        that parses them itself)."""
        return await self.request("GET", path, params=params, raw=raw)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON to ``path`` and return the parsed JSON answer."""
        return await self.request("POST", path, json=body)

    async def request(self, method: str, path: str, params: dict[str, Any] | None = None,
                      json: Any = None, raw: bool = False) -> Any:
        """One call with retries. Raises :class:`NotFound`, :class:`TooHeavy`, or
        :class:`SourceError` (auth, bad request, retries exhausted); ``ValueError`` for a
        ``json`` body that is not JSON (NaN)."""
        query = _query(params)
        data = None if json is None else jsonlib.dumps(
            json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        headers = self._headers if data is None else \
            {**self._headers, "Content-Type": "application/json"}
        if self._session is None:  # a session belongs to the running event loop
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._concurrency), timeout=self._timeout,
                read_bufsize=_READ_BUFSIZE)
        attempt = 0
        slowed_since: float | None = None  # the first "slow down": the budget runs from it
        while True:
            wait: float | None = None
            after: float | None = None  # a Retry-After this request waits alone
            try:
                async with self._semaphore:
                    try:
                        ticket = self.limits.try_acquire() or await self.limits.acquire(
                            None if slowed_since is None else
                            slowed_since + self.rate_limit_budget_s - time.monotonic())
                    except StillRefusing as exc:  # (half-open past this request's budget)
                        raise SourceError(f"langfuse: {method} {self.host}{path} still "
                                          f"rate-limited after {self.rate_limit_budget_s:g} "
                                          f"s: {exc}") from None
                    self.stats.requests += 1
                    try:
                        async with self._session.request(method, self.host + path,
                                                         params=query, data=data,
                                                         headers=headers) as resp:
                            status, body, resp_headers = \
                                resp.status, await resp.read(), resp.headers
                    except BaseException:
                        self.limits.failed(ticket)
                        raise
                    slow = status == 429 or (status == 503 and "retry-after" in resp_headers)
                    if status < 300:
                        self.limits.ok(ticket, rate_limit_quotas(resp_headers))
                    elif slow:
                        after = retry_after_seconds(resp_headers)
                        after = None if after is None else min(after, _MAX_BACKOFF_S)
                        if self.limits.refused(ticket, status != 429, after,
                                               rate_limit_quotas(resp_headers)):
                            after = None  # the endpoint is paused: every request waits

                    else:
                        self.limits.failed(ticket)
            except aiohttp.InvalidURL as exc:
                raise SourceError(f"langfuse: {self.host}{path} is not a valid URL: {exc}; "
                                  "check the host") from None
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                self.stats.by_status[str(status)] = self.stats.by_status.get(str(status), 0) + 1
                if status < 300:
                    return body if raw else parse_body(body, f"{method} {path}")
                if status == 404:
                    raise NotFound(f"{method} {path}: 404 {_body(body)}")
                if status == 422:
                    self.stats.too_heavy += 1
                    raise TooHeavy(f"{method} {path}: 422 {_body(body)}")
                if status in (401, 403):
                    raise AuthError(f"langfuse: {method} {self.host}{path} answered {status}: "
                                      f"check {PUBLIC_KEY_ENV}, {SECRET_KEY_ENV} and the host "
                                      "(keys belong to one project and one region)")
                if status not in _RETRY_STATUSES:
                    raise SourceError(f"langfuse: {method} {path} answered {status}: "
                                      f"{_body(body)}")
                if status == 429:
                    self.stats.rate_limited += 1
                problem = f"{status} {_body(body)}"
                if slow:
                    if slowed_since is None:  # time queued before it was no retrying
                        slowed_since = time.monotonic()
                    if time.monotonic() - slowed_since >= self.rate_limit_budget_s:
                        raise SourceError(f"langfuse: {method} {self.host}{path} still "
                                          f"rate-limited after {self.rate_limit_budget_s:g} s; "
                                          f"last: {problem}")
                    # "slow down": the limits paced or paused every caller; not a failure
                    self.stats.retries += 1
                    if after:  # a refusal taken for noise: this request waits alone
                        await asyncio.sleep(after)
                    continue
                wait = retry_after_seconds(resp_headers)
            if attempt >= self.max_retries:
                raise SourceError(f"langfuse: {method} {self.host}{path} failed after "
                                  f"{attempt + 1} attempts; last: {problem}")
            if wait is None:
                wait = backoff_seconds(attempt, self.backoff_s, _MAX_BACKOFF_S)
            attempt += 1
            self.stats.retries += 1
            await asyncio.sleep(wait)


def _query(params: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Query parameters as pairs: ``None`` left out, a list repeated, booleans as
    ``true``/``false``."""
    pairs = []
    for key, value in (params or {}).items():
        for v in value if isinstance(value, list) else [value]:
            if v is not None:
                pairs.append((key, str(v).lower() if isinstance(v, bool) else str(v)))
    return pairs


def _body(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return text[:300] + ("…" if len(text) > 300 else "")
