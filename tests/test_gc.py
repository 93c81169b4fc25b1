"""``full_collections_paused``: no automatic full collection inside (young ones go on and free
short-lived cycles), and overlapping blocks restore the threshold once the last ends (an LLM
judge's calls run inside one: tests/judges/llm/test_llm_gc.py)."""

from __future__ import annotations

import asyncio
import gc
import weakref

from evalkit._gc import full_collections_paused


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def _watch() -> tuple[list[int], object]:
    collected: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "stop":
            collected.append(info["generation"])

    gc.callbacks.append(callback)
    return collected, callback


def test_young_collections_go_on_and_full_ones_do_not():
    before = gc.get_threshold()
    collected, callback = _watch()
    try:
        with full_collections_paused():
            kept = [[i] for i in range(200_000)]  # long-lived containers, promoted
            cycle = _Node()
            dead = weakref.ref(cycle)
            del cycle
            for _ in range(300_000):  # enough allocations for many young collections
                _Node()
            inside = list(collected)
            assert dead() is None  # the cycle was freed without a full collection
        del kept
    finally:
        gc.callbacks.remove(callback)
    assert inside.count(0) > 10 and 1 in inside
    assert 2 not in inside
    assert gc.get_threshold() == before


def test_overlapping_blocks_restore_the_threshold_after_the_last():
    before = gc.get_threshold()
    order: list[int] = []

    async def hold(seconds: float) -> None:
        with full_collections_paused():
            await asyncio.sleep(seconds)
            order.append(gc.get_threshold()[2])

    async def main() -> None:
        await asyncio.gather(hold(0.01), hold(0.05))

    asyncio.run(main())
    assert order[0] == order[1] != before[2]
    assert gc.get_threshold() == before
