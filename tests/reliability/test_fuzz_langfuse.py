"""Property-based fuzzing of the Langfuse source: generations whose fields hold any JSON
(served by the fake Langfuse server, outside the API's spec: each field of the answer it
would give is replaced by the fuzzed value) read by the real client and mapping. For every
page: no exception escapes, and every generation is a record or a reject with its location
and reason. (A body that is not JSON at all stops its stream with a reject:
tests/sources/langfuse/test_source.py::test_a_page_that_is_not_json_stops_its_stream_with_a_reject.)"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.context import RunContext
from evalkit.sources.langfuse import LangfuseSource, LangfuseSourceConfig
from evalkit.testing import read_source
from tests.reliability.fuzzing import COUNTS, fuzz

sys.path.insert(0, str(Path(__file__).parents[1] / "sources" / "langfuse"))
from fake_server import PUBLIC_KEY, SECRET_KEY, FakeLangfuse, _obs, iso  # noqa: E402

T0 = datetime(2026, 5, 1, 10, tzinfo=timezone.utc)
FLOAT = st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | FLOAT | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=5)
TIME = st.one_of(st.just(iso(T0 + timedelta(seconds=2))), st.none(), JSON,
                 st.sampled_from(["2026-05-01T10:00:00", "2026-13-01T00:00:00Z", "", "now"]))
# each field a generation may carry, with values of the right shape or any JSON
FIELDS = {
    "input": JSON, "output": JSON, "level": st.sampled_from(["DEFAULT", "ERROR"]) | JSON,
    "statusMessage": JSON, "model": st.text(max_size=6) | JSON, "name": JSON,
    "usageDetails": st.dictionaries(st.sampled_from(["input", "output", "total"]),
                                    st.integers() | JSON, max_size=3) | JSON,
    "costDetails": st.dictionaries(st.sampled_from(["input", "output", "total"]),
                                   FLOAT | JSON, max_size=3) | JSON,
    "totalCost": FLOAT | JSON, "metadata": JSON, "endTime": TIME,
    "completionStartTime": TIME, "latency": FLOAT | JSON,
    "promptVersion": st.integers() | JSON, "providedModelName": st.text(max_size=6) | JSON,
    "startTime": TIME, "traceId": JSON, "type": JSON, "environment": JSON,
    "usage": JSON, "calculatedTotalCost": JSON, "timeToFirstToken": JSON,
}
GENERATION = st.fixed_dictionaries({}, optional=FIELDS)


class FuzzedLangfuse(FakeLangfuse):
    """The fake, answering with each generation's ``fuzz`` fields in place of its own."""

    def render_v2(self, obs: dict[str, Any], groups: set[str],
                  expand: set[str]) -> dict[str, Any]:
        out = super().render_v2(obs, groups, expand)
        out.update((k, v) for k, v in obs["fuzz"].items() if k in out)
        return out


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLangfuse]:
    fake = FuzzedLangfuse("v4", validate=False)
    url = fake.start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
        patch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
        patch.setenv("LANGFUSE_HOST", url)
        yield fake
    fake.stop()


EXAMPLE = count()


def _serve(fake: FakeLangfuse, generations: list[dict[str, Any]]) -> list[str]:
    """Replace what the server holds with one trace and these generations; their ids."""
    n = next(EXAMPLE)
    fake.traces.clear()
    fake.observations.clear()
    tid = f"trace-{n}"
    fake.add_trace({"id": tid, "timestamp": iso(T0), "name": "t", "input": None,
                    "output": None, "sessionId": None, "release": None, "version": None,
                    "userId": None, "metadata": {}, "tags": [], "public": False,
                    "environment": "production"})
    ids = []
    for i, fields in enumerate(generations):
        oid = f"gen-{n}-{i}"
        obs = _obs(oid, tid, "GENERATION", "call", T0 + timedelta(seconds=i), T0, None, "q",
                   "a", i)
        obs["fuzz"] = fields
        fake.add_observation(obs)
        ids.append(oid)
    return ids


@fuzz(examples=40)
@given(generations=st.lists(GENERATION, min_size=1, max_size=6), workers=st.sampled_from([0, 1]))
def test_fuzzed_langfuse_generations_are_records_or_rejects(server: FakeLangfuse,
                                                            tmp_path_factory,
                                                            generations: list[dict[str, Any]],
                                                            workers: int) -> None:
    ids = _serve(server, generations)
    tmp = tmp_path_factory.mktemp("lf")
    cfg = LangfuseSourceConfig(from_time="2026-05-01T00:00:00Z", to_time="2026-05-02T00:00:00Z",
                               progress=False, resolve_retry_s=0.0, import_scores=False,
                               workers=workers)
    cfg.validate()
    ctx = RunContext(run_id="r1", experiment="lf", run_dir=tmp / "runs" / "r1",
                     runs_dir=tmp / "runs", cache_dir=tmp / "cache")
    got = read_source(LangfuseSource("source", cfg, ctx).read())
    records = [rid for t in got.batches for rid in t.column("record_id").to_pylist()]
    rejects = got.reject_rows
    assert len(records) == len(set(records)) and set(records) <= set(ids)
    for reject in rejects:
        assert reject["location"] and reject["reason"], reject
    # each generation not read is named by a reject (its id in the location or raw)
    for oid in set(ids) - set(records):
        assert any(oid in (r["location"] + (r["raw"] or "")) for r in rejects), oid
    assert len(records) + len(rejects) == len(ids)
    counts = COUNTS["langfuse"]
    counts["examples"] += 1
    counts["records"] += len(records)
    counts["rejects"] += len(rejects)
    assert os.environ["LANGFUSE_HOST"] == server.url
