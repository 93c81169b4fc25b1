"""The concurrency and rpm limits of one endpoint hold across all the processes of a parallel
sweep: the fake model server, in this process, sees the jobs' calls together."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_dirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer  # noqa: E402

from evalkit.judges.llm._sharedlimit import SharedLimits  # noqa: E402

pytestmark = pytest.mark.e2e  # runs evalkit end to end

EXPERIMENT = """\
# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]
experiment: lim
source:
  path: data.jsonl
  limit: {n}
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: {url}
    api_key_env: null
    cache: false
    concurrency: {concurrency}
    rpm: {rpm}
    max_retries: 0
metrics:
  flagged: {{plugin: rate, judge: hallucination_llm}}
"""


def _project(cwd: Path, url: str, n: int, concurrency: int, rpm: int | None) -> None:
    (cwd / "conf" / "experiment").mkdir(parents=True)
    (cwd / "conf" / "experiment" / "lim.yaml").write_text(EXPERIMENT.format(
        url=url, n=n, concurrency=concurrency, rpm="null" if rpm is None else rpm))
    rows = [{"id": f"r{i}", "input": f"question {i} about the build",
             "output": f"the build {i} is red", "context": f"build {i} went red on Tuesday"}
            for i in range(n)]
    (cwd / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _sweep(cwd: Path) -> None:
    run_cli("run", "-m", "+experiment=lim", "metrics.flagged.threshold=0.2,0.5,0.8",
            "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", "runner.summary=false",
            cwd=cwd, env={"EVALKIT_CACHE_DIR": str(cwd / "cache")})
    assert len(run_dirs(cwd, "lim")) == 3


def test_concurrency_holds_across_the_jobs_of_a_sweep(tmp_path: Path) -> None:
    server = FakeLLMServer(latency=0.15).start()
    try:
        _project(tmp_path, server.url, n=12, concurrency=2, rpm=None)
        _sweep(tmp_path)
        assert len(server.requests) == 36
        # each job alone would keep 2 in flight, three jobs 6: the sweep keeps 2 in all
        assert server.max_in_flight == 2
    finally:
        server.stop()


def test_rpm_holds_across_the_jobs_of_a_sweep(tmp_path: Path) -> None:
    server = FakeLLMServer().start()
    try:
        _project(tmp_path, server.url, n=8, concurrency=16, rpm=300)  # 5/s, burst of 5
        _sweep(tmp_path)
        times = sorted(r["time"] for r in server.requests)
        assert len(times) == 24, [round(t - times[0], 2) for t in times]
        # 24 calls at 5/s after a burst of 5 take >= 3.8 s; three private buckets ~0.6 s
        # (the margin: a job's first call reaches the server later than it took its token)
        assert times[-1] - times[0] >= 2.8
        # no second holds more than the burst and a refill (from 0.5 s on: a job's first
        # calls wait for its connection after taking their tokens and arrive bunched)
        for i, t in enumerate(times):
            if t >= times[0] + 0.5:
                assert sum(1 for u in times[i:] if u < t + 1.0) <= 10
    finally:
        server.stop()


_HOLDER = """
import asyncio, sys
from pathlib import Path
from evalkit.judges.llm._sharedlimit import SharedLimits
async def hold():
    async with SharedLimits(Path(sys.argv[1]), "m|b", 1, None, None).slot():
        print("held", flush=True)
        await asyncio.sleep(60)
asyncio.run(hold())
"""


async def _taken_within(limits: SharedLimits, seconds: float) -> bool:
    async def take() -> None:
        async with limits.slot():
            pass

    try:
        await asyncio.wait_for(take(), seconds)
    except TimeoutError:
        return False
    return True


def test_a_slot_held_by_another_process_is_given_back_when_it_dies(tmp_path: Path) -> None:
    import signal
    import subprocess

    limits = SharedLimits(tmp_path, "m|b", concurrency=1, rpm=None, tpm=None)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert not asyncio.run(_taken_within(limits, 0.3))  # its one slot is held
        holder.send_signal(signal.SIGKILL)  # killed mid-call: no chance to give it back
        holder.wait(10)
        assert asyncio.run(_taken_within(limits, 2.0))
    finally:
        holder.kill()
        holder.wait()


def test_slots_keep_the_limit_and_wake_the_callers_of_this_process(tmp_path: Path) -> None:
    limits = SharedLimits(tmp_path, "m|b", concurrency=3, rpm=None, tpm=None)
    in_flight = peak = 0

    async def call() -> None:
        nonlocal in_flight, peak
        async with limits.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0)
            in_flight -= 1

    async def calls() -> None:
        await asyncio.gather(*(call() for _ in range(300)))

    asyncio.run(calls())
    assert peak == 3 and in_flight == 0
    assert asyncio.run(_taken_within(limits, 1.0))  # every slot was given back


def test_a_call_in_flight_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Taking and giving back a slot is a lock on a byte of a file opened once, not a rewrite
    of a state file: 10,000 calls at concurrency 256 in one process paid two locked JSON
    rewrites each (5x the plain run's judge stage)."""
    import evalkit.judges.llm._sharedlimit as shared

    opened: list[object] = []
    real_open = os.open

    def counting_open(*args: object, **kwargs: object) -> int:
        opened.append(args[0])
        return real_open(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shared.os, "open", counting_open)
    monkeypatch.setattr(shared.os, "replace", lambda *a: pytest.fail("state file rewritten"))
    limits = SharedLimits(tmp_path, "m|b", concurrency=8, rpm=None, tpm=None)

    async def calls() -> None:
        async def call() -> None:
            async with limits.slot():
                await asyncio.sleep(0)

        await asyncio.gather(*(call() for _ in range(200)))

    asyncio.run(calls())
    assert len(opened) <= 1  # the slot file, once for the process
    assert not limits.path.exists()


def test_a_rate_token_is_taken_by_a_rewrite_in_place(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucket's state is rewritten under its lock, not renamed over (about a millisecond
    of blocking I/O a call on ext4); another process's view of it is the same."""
    import evalkit.judges.llm._sharedlimit as shared

    monkeypatch.setattr(shared.os, "replace", lambda *a: pytest.fail("state file renamed"))
    one = SharedLimits(tmp_path, "m|b", concurrency=8, rpm=600, tpm=None)  # burst of 10
    other = SharedLimits(tmp_path, "m|b", concurrency=8, rpm=600, tpm=None)

    async def take(n: int) -> None:
        for i in range(n):
            await (one if i % 2 else other).acquire("rpm")

    asyncio.run(take(6))
    tokens = json.loads(one.path.read_text())["rpm"]["tokens"]
    assert 4.0 <= tokens < 5.0  # 10 - 6, and what refilled in the meantime
    one.path.write_text("{not json")  # a torn state: a full bucket, not a failure
    asyncio.run(take(1))
    assert 9.0 <= json.loads(one.path.read_text())["rpm"]["tokens"] < 10.0


def _writer(directory: str, worker: int, n: int) -> None:
    from evalkit.judges.llm._cache import ResponseCache

    cache = ResponseCache(Path(directory))
    for i in range(n):
        # half the keys every worker writes too (the same answer: the same request)
        key = f"shared-{i}" if i % 2 else f"w{worker}-{i}"
        cache.put(key, "m", {"score": i, "by": "any" if i % 2 else worker})
        if i % 17 == 0:
            cache.get(f"shared-{i - 1}")
    cache.close()


def test_the_response_cache_is_shared_by_processes_without_corruption(tmp_path: Path) -> None:
    import multiprocessing
    import sqlite3

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 400)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    con = sqlite3.connect(tmp_path / "llm_responses.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = dict(con.execute("SELECT key, value FROM responses").fetchall())
    assert len(rows) == 4 * 200 + 200  # each worker's own keys, and the shared ones once
    assert json.loads(rows["shared-399"]) == {"score": 399, "by": "any"}
    assert json.loads(rows["w3-398"]) == {"score": 398, "by": 3}



_JOB = """
import asyncio, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from llm_helpers import make, records
from evalkit.context import RunContext
from evalkit.judges.llm.correctness import CorrectnessLlmJudge

class Server:
    url = sys.argv[2]

tmp = Path(sys.argv[3])
ctx = RunContext(run_id="r", experiment="e", run_dir=tmp / "run", runs_dir=tmp / "runs",
                 cache_dir=tmp / "cache")
judge = make(CorrectnessLlmJudge, ctx, Server, cache=False, concurrency=16)
rows = [{"input": f"question {i}", "output": "an answer", "reference": "an answer"}
        for i in range(int(sys.argv[4]))]
time.sleep(max(0.0, float(sys.argv[5]) - time.time()))  # (the parent says when to start)
out = asyncio.run(judge.ajudge(records(*rows)))
print(json.dumps({"ok": sum(r["status"] == "ok" for r in out), **judge.engine.stats()}))
"""


def test_the_window_of_calls_in_flight_is_the_sweeps(tmp_path: Path) -> None:
    """Two jobs calling one endpoint that takes 6 calls in flight, the second starting once
    the first found the limit: it takes the window the first found (the shared call slots
    hold it for both together) instead of finding its own, which the two together would
    overrun and be refused on and on."""
    import subprocess
    import time

    from fake_limits import ProviderLimits

    server = FakeLLMServer(latency=0.1).start()
    limits = ProviderLimits(server, in_flight=6, retry_after=False)
    seen: list[tuple[float, int, bool]] = []  # arrival, calls in flight at the server, refused

    def plan(body: dict) -> object:
        flying = server.in_flight
        reply = limits(body)
        seen.append((time.time(), flying, reply.status == 429))
        return reply

    server.plan = plan
    env = {**os.environ, "EVALKIT_LIMITS_DIR": str(tmp_path / "limits")}
    helpers = str(Path(__file__).resolve().parents[1] / "judges" / "llm")
    start = time.time() + 4.0  # (time for both to import evalkit on a loaded host)
    try:
        jobs = [subprocess.Popen([sys.executable, "-c", _JOB, helpers, server.url,
                                  str(tmp_path / f"job{i}"), "150", str(start + 1.5 * i)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for i in range(2)]
        results = [job.communicate(timeout=120) for job in jobs]
    finally:
        server.stop()
    for job, (_, err) in zip(jobs, results, strict=True):
        assert job.returncode == 0, err[-2000:]
    stats = [json.loads(out.splitlines()[-1]) for out, _ in results]
    assert [one["ok"] for one in stats] == [150, 150]
    second = [(flying, refused) for at, flying, refused in seen if at > start + 1.5]
    assert len(second) > 100
    # the server never has more in flight than the limit and a call (a refused one counts)
    assert max(flying for flying, _ in second) <= 6 + 1
    assert sum(refused for _, refused in second) <= 0.1 * len(second)
    # the second job took the window the first found; before, it was refused until it had
    # found its own (5 to 24 times, with the pace shared; measured)
    assert stats[1]["in_flight"] and stats[1]["refusals"] <= 3, stats
