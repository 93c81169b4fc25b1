"""Starting thousands of record tasks without holding up the first calls. Each record's
first step renders its prompt, hashes its cache key and looks the key up before it waits
for a call slot; started all in one go (``asyncio.gather`` over every record, the plain
version and the tests' reference), ten thousand such steps run back to back before the
event loop first serves a socket, and the first calls' answers wait for all of them.
:func:`gather_fed` starts the tasks a chunk at a time and lets the loop serve what is ready
between chunks: the same tasks, started in the same order, the same results."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")

CHUNK = 64  # tasks started between two turns of the event loop


async def gather_fed(aws: Iterable[Awaitable[T]], chunk: int = CHUNK) -> list[T]:
    """``list(await asyncio.gather(*aws))``, the tasks started ``chunk`` at a time with a
    turn of the event loop between chunks."""
    tasks: list[asyncio.Future[T]] = []
    try:
        for aw in aws:
            tasks.append(asyncio.ensure_future(aw))
            if len(tasks) % chunk == 0:
                await asyncio.sleep(0)
    except BaseException:  # cancelled while starting them: so are the tasks already started
        for task in tasks:
            task.cancel()
        raise
    return list(await asyncio.gather(*tasks))
