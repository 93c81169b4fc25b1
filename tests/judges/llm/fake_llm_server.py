"""A fake OpenAI-compatible chat-completions server for the LLM judge tests and benchmarks,
which also speaks Anthropic's messages API (``/v1/messages``) for the litellm transport.

It answers every judge prompt of evalkit deterministically (a tiny rule-based "model" that
reads the delimited blocks), and can be scripted per request: latency, HTTP errors with
Retry-After, timeouts, malformed or fenced JSON, explicit log-probabilities. It records every
request body it receives, so tests can assert what the judge model actually saw.

Run standalone (for bench/): ``python fake_llm_server.py --latency 0.05`` prints
``PORT <n>`` and serves until killed."""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_WORDS = re.compile(r"[a-z0-9]+")


@dataclass
class Reply:
    """One scripted answer. ``content=None`` lets the rule-based model answer."""

    status: int = 200
    content: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float | None = None  # seconds before answering (default: the server's latency)
    body: str | None = None  # a raw response body (non-200 replies)
    logprobs: list[dict[str, Any]] | None = None
    reset: bool = False  # drop the connection instead of answering (a connection reset)


def block(text: str, tag: str) -> str:
    """The unescaped content of the first ``<tag>`` block of a prompt ("" when absent)."""
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.DOTALL)
    return html.unescape(m.group(1)) if m else ""


def _words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(text.lower()) if len(w) > 3}


def _support(claim: str, source: str) -> float:
    words = _words(claim)
    return len(words & _words(source)) / len(words) if words else 1.0


def rule_based_answer(body: dict[str, Any]) -> str:
    """What the fake model answers to an evalkit judge prompt."""
    msgs = body["messages"]
    system = msgs[0]["content"]
    user = msgs[1]["content"] if len(msgs) > 1 else ""
    output = block(user, "output")
    context = " ".join(html.unescape(p) for p in re.findall(
        r'<passage index="\d+">\n(.*?)\n</passage>', user, re.DOTALL))
    if "design evaluation procedures" in system:
        answer: dict[str, Any] = {"steps": ["Read the input.", "Read the output.",
                                            "Compare them and score."]}
    elif "careful grader" in system:
        answer = {"score": 4 if output.strip() else 1, "reason": "rule-based"}
    elif "atomic factual claims" in system:
        limit = int(re.search(r"at most (\d+) claims", system).group(1))
        sentences = [s.strip() for s in re.split(r"[.!?\n]+", output) if len(s.strip()) > 3]
        answer = {"claims": [{"claim": s, "question": f"Is it true that {s}?"}
                             for s in sentences[:limit]]}
    elif "verification questions" in system:
        questions = re.findall(r'<question index="(\d+)">(.*?)</question>', user, re.DOTALL)
        answers = []
        for index, q in questions:
            claim = html.unescape(q).removeprefix("Is it true that ").rstrip("?")
            share = _support(claim, context)
            verdict = "unknown" if "maybe" in claim.lower() else \
                "yes" if share >= 0.6 else "no"
            answers.append({"index": int(index), "answer": verdict})
        answer = {"answers": answers}
    elif "evaluator of hallucination" in system:
        grounded = _support(output, context or block(user, "input")) >= 0.6
        if '"hallucinated"' in system:
            answer = {"reasoning": "rule-based", "hallucinated": not grounded}
        else:
            answer = {"reasoning": "rule-based", "score": 0.0 if grounded else 1.0}
    elif "correctness of an AI output" in system:
        same = _words(output) == _words(block(user, "reference"))
        answer = {"reasoning": "rule-based", "verdict": "correct" if same else "incorrect"}
    elif "diagnose why" in system:
        obs = block(user, "observation")
        answer = {"label": "pipeline_failure" if "ERROR" in obs else "other",
                  "explanation": "rule-based"}
    elif "compare two AI responses" in system:
        answer = {"reasoning": "position-biased fake", "winner": "A"}
    else:
        answer = {"error": "unknown prompt"}
    return json.dumps(answer)


def _echo(content: str, seen: str) -> str:
    """``content`` with ``seen`` added to the explanation of its JSON answer (or appended)."""
    try:
        answer = json.loads(content)
    except ValueError:
        return content + seen
    for key in ("reasoning", "explanation", "reason"):
        if isinstance(answer, dict) and key in answer:
            answer[key] = f"{answer[key]}{seen}"
            return json.dumps(answer)
    return content + seen


def _tokens(text: str) -> list[str]:
    return re.findall(r"\d|[A-Za-z_]+|\s+|[^\w\s]", text)


def certain_logprobs(text: str) -> list[dict[str, Any]]:
    """Log-probabilities of a model sure of every token."""
    return [{"token": t, "logprob": 0.0, "top_logprobs": [{"token": t, "logprob": 0.0}]}
            for t in _tokens(text)]


class FakeLLMServer:
    """The server, in a background thread of the test process (``start``/``stop``)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests: list[dict[str, Any]] = []
        self.script: deque[Reply | Callable[[dict[str, Any]], Reply]] = deque()
        self.answer: Callable[[dict[str, Any]], str] = rule_based_answer
        # response formats refused with a 400, as a server without structured output does
        self.refused_formats: set[str] = set()
        # a careless server: its answers and error bodies quote the credentials it received
        self.echo_credentials = False
        # answers every request the script does not (e.g. a FaultPlan); None: the model
        self.plan: Callable[[dict[str, Any]], Reply] | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        """Script the next replies, in order (after them, the rule-based model answers)."""
        self.script.extend(replies)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle_anthropic)
        app.router.add_get("/stats", self._stats)
        return app

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": len(self.requests),
                                  "max_in_flight": self.max_in_flight,
                                  # a plan enforcing limits (fake_limits.ProviderLimits)
                                  "refused": getattr(self.plan, "refused", 0),
                                  "tokens": getattr(self.plan, "tokens_accepted", 0)})

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"body": body, "headers": dict(request.headers),
                              "time": time.monotonic(), "path": request.path,
                              "query": dict(request.query),
                              # (host, port) of the caller: a test finds its process
                              "peer": request.transport.get_extra_info("peername")
                              if request.transport is not None else None})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            fmt = (body.get("response_format") or {}).get("type")
            if fmt in self.refused_formats:
                return web.json_response(status=400, data={"error": {
                    "message": f"Invalid parameter: 'response_format' of type '{fmt}' is not "
                               "supported with this model.",
                    "type": "invalid_request_error", "param": "response_format"}})
            reply = self.script.popleft() if self.script else \
                self.plan(body) if self.plan is not None else Reply()
            if callable(reply):
                reply = reply(body)
            delay = self.latency if reply.delay is None else reply.delay
            if delay:
                await asyncio.sleep(delay)
            if reply.reset and request.transport is not None:
                request.transport.abort()
                return web.Response()
            seen = f" (you sent Authorization: {request.headers.get('Authorization')} to " \
                f"{request.url})" if self.echo_credentials else ""
            if reply.status != 200:
                return web.Response(status=reply.status, headers=reply.headers,
                                    text=reply.body or json.dumps(
                                        {"error": {"message": f"fake {reply.status}{seen}"}}),
                                    content_type="application/json")
            content = self.answer(body) if reply.content is None else reply.content
            if seen:
                content = _echo(content, seen)
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": content}}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": reply.logprobs or certain_logprobs(content)}
            prompt_chars = sum(len(m.get("content") or "") for m in body["messages"])
            data = {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": body.get("model"),
                    "choices": [choice],
                    "usage": {"prompt_tokens": prompt_chars // 4 + 1,
                              "completion_tokens": len(content) // 4 + 1,
                              "total_tokens": prompt_chars // 4 + len(content) // 4 + 2}}
            return web.json_response(data, headers=reply.headers)
        finally:
            self.in_flight -= 1

    async def _handle_anthropic(self, request: web.Request) -> web.Response:
        """Anthropic's messages API: the same script and rule-based model, the answer as a
        text block (or as the input of the tool litellm asks for structured output)."""
        body = await request.json()
        self.requests.append({"body": body, "headers": dict(request.headers),
                              "time": time.monotonic(), "path": request.path})
        reply = self.script.popleft() if self.script else Reply()
        if callable(reply):
            reply = reply(body)
        delay = self.latency if reply.delay is None else reply.delay
        if delay:
            await asyncio.sleep(delay)
        if reply.status != 200:
            return web.Response(status=reply.status, headers=reply.headers,
                                text=reply.body or json.dumps({"type": "error", "error": {
                                    "type": "api_error", "message": f"fake {reply.status}"}}),
                                content_type="application/json")
        system = body.get("system") or ""
        if isinstance(system, list):
            system = "".join(part.get("text", "") for part in system)
        chat = [{"role": "system", "content": system}] + [
            {"role": m["role"], "content": m["content"] if isinstance(m["content"], str)
             else "".join(p.get("text", "") for p in m["content"])}
            for m in body["messages"]]
        content = self.answer({**body, "messages": chat}) if reply.content is None \
            else reply.content
        tools = [t["name"] for t in body.get("tools") or []]
        try:
            answer = json.loads(content) if tools else None
        except ValueError:
            answer = None
        block_: dict[str, Any] = {"type": "text", "text": content} if not isinstance(
            answer, dict) else {"type": "tool_use", "id": "toolu_1", "name": tools[0],
                                "input": answer}
        prompt_chars = sum(len(m["content"]) for m in chat)
        return web.json_response({
            "id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
            "model": body.get("model"), "content": [block_],
            "stop_reason": "tool_use" if block_["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": prompt_chars // 4 + 1,
                      "output_tokens": len(content) // 4 + 1}}, headers=reply.headers)

    async def serve(self, port: int = 0) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> FakeLLMServer:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def main() -> None:
    """Serve in the foreground (the benchmark runs the server in its own process)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--limits", default=None, help="JSON: fake_limits.ProviderLimits "
                        "keywords, and 'then': [after, {limits}] for a change mid-run")
    args = parser.parse_args()
    server = FakeLLMServer(args.latency)
    if args.limits:
        from fake_limits import ProviderLimits

        options = json.loads(args.limits)
        then = options.pop("then", None)
        server.plan = ProviderLimits(server, **options)
        if then:
            server.plan.then(then[0], **then[1])

    async def forever() -> None:
        await server.serve(args.port)
        print(f"PORT {server.port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(forever())


if __name__ == "__main__":
    main()
