"""A chat-completions server on 127.0.0.1 whose replies are huge: a JSON answer whose
content string goes on for ``size`` bytes (or forever), streamed in chunks, with its size
declared in Content-Length or not. It counts what it managed to send. Shared by
tests/trust/test_judge_replies.py and bench/reliability.py."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

CHUNK = 1 << 20


class BigReplyServer:
    """``start()``/``stop()``; ``url`` is the base URL a judge's ``api_base`` takes."""

    def __init__(self, size: int | None, declared: bool = False) -> None:
        self.size = size  # None: never ends
        self.declared = declared
        self.sent = 0  # bytes of every reply, all requests together
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        head = b'{"choices": [{"message": {"role": "assistant", "content": "'
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if self.declared and self.size is not None:
            resp.content_length = self.size
        await resp.prepare(request)
        await resp.write(head)
        sent = len(head)
        block = b"x" * CHUNK
        try:
            while self.size is None or sent < self.size:
                await resp.write(block)
                sent += len(block)
                self.sent += len(block)
        except (ConnectionError, asyncio.CancelledError):
            return resp  # the client stopped reading: what it should do
        return resp

    def start(self) -> BigReplyServer:
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = self._runner.addresses[0][1]

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None or self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
