"""Worker processes that parse and map v4 cursor pages of observations, so that a read of many
pages is not bound by one process's CPU: the reader's event loop only receives bodies, hands
each to an idle worker and takes back an Arrow table.

Decoding a page of 1,000 observations (about 1 MB of JSON, ~40 keys each) into Python objects
and mapping it to record columns takes 7-8 ms of CPU (msgspec structs; 9-10 ms from orjson's
dicts) and holds the GIL, so no thread can overlap it, and eight pages arrive per round trip
at the default concurrency. The workers run below the reader's priority
(:func:`evalkit._fork.lower_priority`). They are forked while the process has a single thread
(a forked child imports nothing and starts in milliseconds); otherwise there are none and
pages are mapped in the reader, as they always can be.

A worker runs exactly the reader's own mapping function (``_Reader.page_table``) and answers an
empty message whenever the page does not map whole (a malformed body, an object that does not
map, a value that does not fit its column): the reader then maps that page itself, which finds
the rejects. So the records, rejects and their order do not depend on where a page was mapped.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import signal
import socket
import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.ipc

from evalkit._fork import lower_priority

__all__ = ["PageMapper", "PagePool"]

# A page mapper: the body of a cursor page -> its record table, raising when it does not map
# whole (any exception: the reader maps the page itself).
PageMapper = Callable[[bytes], pa.Table]

_HEADER = struct.Struct("<Q")  # a message: its length, then its bytes
_BUFFER = 4 << 20  # socket buffers that hold a whole page: one wake-up per message


class PagePool:
    """``n`` forked processes, each mapping one page at a time with ``mapper``. The reader's
    event loop talks to them over socket pairs (no thread: a thread doing the pipe I/O would
    wait for the GIL, up to 5 ms, at every chunk of a page while the loop runs)."""

    def __init__(self, n: int, mapper: PageMapper) -> None:
        ctx = multiprocessing.get_context("fork")
        self._socks: list[socket.socket] = []
        self._procs: list[Any] = []
        for _ in range(n):
            ours, theirs = socket.socketpair()
            for sock in (ours, theirs):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
            # the child closes its copies of the reader's ends, so that a worker sees its
            # socket close when the reader closes it
            proc = ctx.Process(target=_serve, args=(theirs, mapper, [*self._socks, ours]),
                               daemon=True, name="langfuse-page-worker")
            proc.start()
            theirs.close()
            self._socks.append(ours)
            self._procs.append(proc)
        self._idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] | None = \
            None
        self._streams: list[asyncio.StreamWriter] = []
        self._alive = n
        self.pages = 0  # mapped on a worker
        self.declined = 0  # answered "map it yourself"

    def __len__(self) -> int:
        return len(self._procs)

    async def map(self, body: bytes) -> pa.Table | None:
        """``body`` mapped on the next idle worker, or ``None`` when the reader must map it
        (the page does not map whole, or the worker is gone)."""
        if self._idle is None:  # streams belong to the loop that first uses them
            self._idle = asyncio.Queue()
            for sock in self._socks:
                reader, writer = await asyncio.open_unix_connection(sock=sock)
                self._streams.append(writer)
                self._idle.put_nowait((reader, writer))
        if not self._alive:
            return None
        reader, writer = await self._idle.get()
        try:
            writer.write(_HEADER.pack(len(body)))
            writer.write(body)
            await writer.drain()
            (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            answer = await reader.readexactly(size) if size else b""
        except (OSError, EOFError, asyncio.IncompleteReadError):  # the worker died
            self._alive -= 1
            return None
        except BaseException:
            # cancelled while the worker holds a request: its answer would be read by the
            # next caller, so this worker is not used again
            self._alive -= 1
            raise
        self._idle.put_nowait((reader, writer))
        if not answer:
            self.declined += 1
            return None
        self.pages += 1
        return pa.ipc.open_stream(pa.py_buffer(answer)).read_all()

    def detach(self) -> None:
        """Close the streams of the loop that used them (before that loop ends)."""
        for writer in self._streams:
            writer.close()
        self._streams = []
        self._alive = 0

    def close(self) -> None:
        """Stop the workers: each exits when its socket closes."""
        for sock in self._socks:
            sock.close()
        self._alive = 0
        for proc in self._procs:
            proc.join(timeout=1)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _serve(sock: socket.socket, mapper: PageMapper, readers: list[socket.socket]) -> None:
    """A worker's loop: a body in, its table out as an Arrow IPC stream (empty: map it
    yourself), until the reader closes the socket."""
    for other in readers:
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the reader stops the workers
    lower_priority()  # below the reader's event loop (a round trip took ~10 ms less)
    gc.disable()  # parsed pages hold no cycles: collections would free nothing
    while True:
        try:
            header = _recv(sock, _HEADER.size)
            body = _recv(sock, _HEADER.unpack(header)[0])
        except (EOFError, OSError):
            return
        try:
            table = mapper(bytes(body))
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            answer: Any = sink.getvalue()
        except Exception:  # noqa: BLE001 - any failure: the reader maps the page and reports
            answer = b""
        try:
            sock.sendall(_HEADER.pack(len(answer)))
            sock.sendall(answer)
        except OSError:
            return


def _recv(sock: socket.socket, n: int) -> bytearray:
    """Exactly ``n`` bytes from ``sock``; ``EOFError`` when it closes first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf
