"""``gather_fed`` (the judge's records started a chunk at a time) against the plain
``asyncio.gather``: the same results in the same order, the same first steps in the same
order, the same error; and the event loop serves what is ready between chunks."""

from __future__ import annotations

import asyncio
import random

import pytest

from evalkit.judges.llm._feed import gather_fed


def _run(gather, n: int, seed: int, fail_at: int | None = None):
    rng = random.Random(seed)
    delays = [rng.choice([0, 0, 0.001, 0.003]) for _ in range(n)]
    started: list[int] = []

    async def one(i: int) -> tuple[int, str]:
        started.append(i)
        await asyncio.sleep(delays[i])
        if i == fail_at:
            raise ValueError(f"record {i}")
        return i, f"r{i}"

    async def main():
        return await gather(one(i) for i in range(n))

    try:
        return asyncio.run(main()), started
    except ValueError as exc:
        return str(exc), started


async def _plain(aws):
    return list(await asyncio.gather(*aws))


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000])
def test_same_results_and_order_as_gather(n: int):
    assert _run(gather_fed, n, n) == _run(_plain, n, n)


def test_the_same_error_as_gather():
    fed, plain = _run(gather_fed, 500, 3, fail_at=200), _run(_plain, 500, 3, fail_at=200)
    assert fed[0] == plain[0] == "record 200"


def test_the_loop_serves_ready_work_between_chunks():
    """A timer due before the tasks start (as a socket ready to be read) runs before the
    second chunk's first step; with the plain gather, after every task's first step."""
    def order(gather) -> int:
        seen: list[str] = []

        async def one(i: int) -> None:
            seen.append("task")

        async def main() -> None:
            asyncio.get_running_loop().call_later(0, seen.append, "ready")
            await gather(one(i) for i in range(1000))

        asyncio.run(main())
        return seen.index("ready")

    assert order(gather_fed) == 64
    assert order(_plain) == 1000


def test_cancelled_while_starting_cancels_what_it_started():
    started: list[asyncio.Task] = []

    async def one() -> None:
        started.append(asyncio.current_task())
        await asyncio.sleep(10)

    async def main() -> None:
        feeding = asyncio.ensure_future(gather_fed(one() for _ in range(10_000)))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        feeding.cancel()
        with pytest.raises(asyncio.CancelledError):
            await feeding
        await asyncio.sleep(0)
        assert 0 < len(started) < 10_000
        assert all(t.cancelled() for t in started)

    asyncio.run(main())
