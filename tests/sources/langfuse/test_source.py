"""The Langfuse source against the fake server, for both API generations."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fake_server import FakeLangfuse, Fault, SpecValidator, _obs, make_dataset, parse, score

from evalkit.errors import SourceError
from evalkit.langfuse_client import LangfuseClient
from evalkit.results.writer import write_json
from evalkit.sources.langfuse import LangfuseSourceConfig
from evalkit.sources.langfuse.source import _meta_cursor
from tests.sources.langfuse.conftest import _serve, make_source, odd_observations, read_all

FAILED_KINDS = {"envelope", "http_error", "null"}


def _obs_path(fake: FakeLangfuse) -> str:
    return "/api/public/observations" if fake.generation == "v3" else "/api/public/v2/observations"


def test_records_map_the_same_on_both_generations(fake_v3: FakeLangfuse,
                                                  fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    v3 = read_all(tmp_path / "a", host=fake_v3.url)
    v4 = read_all(tmp_path / "b", host=fake_v4.url)
    assert (v3.fingerprint["api"], v4.fingerprint["api"]) == ("v3", "v4")
    a, b = v3.by_id(), v4.by_id()
    assert a.keys() == b.keys() == fake_v3.info["kinds"].keys()
    for rid, rec in a.items():
        other = b[rid]
        assert {k: v for k, v in rec.items() if k != "metadata"} == \
            {k: v for k, v in other.items() if k != "metadata"}, rid
        assert rec["session_id"].startswith("sess-") and "prod" in rec["tags"]
        meta_v3, meta_v4 = json.loads(rec["metadata"]), json.loads(other["metadata"])
        # v2 truncates metadata values to 200 characters unless expandMetadata names them
        assert len(meta_v3["metadata"].pop("note")) == 250
        assert len(meta_v4["metadata"].pop("note")) == 200
        assert meta_v3 == meta_v4 and meta_v3["trace_name"] == "support-agent"
    # v1 observations lack their trace's session and tags: the source looks the traces up
    lookups = [q for _, p, q in fake_v3.requests if p == "/api/public/traces"]
    assert lookups and all("filter" in q for q in lookups)
    plain = read_all(tmp_path / "c", host=fake_v3.url, trace_context=False).by_id()
    assert all(r["session_id"] is None and r["tags"] is None for r in plain.values())


def test_mapping_feeds_pipeline_failure(fake: FakeLangfuse, tmp_path: Path) -> None:
    kinds = fake.info["kinds"]
    records = read_all(tmp_path).by_id()
    for rid, rec in records.items():
        kind = kinds[rid]
        if kind == "envelope":
            assert rec["level"] == "ERROR" and rec["status_message"] == "429 Too Many Requests"
            assert json.loads(rec["output"])["rawRequest"]["model"] == "gpt-4o-mini"
        elif kind == "null":
            assert rec["output"] is None
        elif kind == "http_error":
            assert json.loads(rec["output"]) == {"error": {"message": "upstream timeout",
                                                           "code": 504}}
        elif kind in ("echo", "refusal"):
            assert not rec["output"].startswith(("{", '"'))  # plain text stays plain text
        assert rec["latency_s"] > 0 and rec["trace_id"].startswith("trace-")
        assert rec["input_tokens"] >= 120 and rec["output_tokens"] >= 80
        i = int(rid.split("-")[1]) if rid != "gen-hidden-0" else 1
        if i % 10 == 0:
            assert rec["cost_usd"] is None  # unknown price: null, never 0
        else:
            assert rec["cost_usd"] == pytest.approx(
                rec["input_tokens"] * 1.5e-7 + rec["output_tokens"] * 6e-7)


def test_scores_become_imported_judgments(fake: FakeLangfuse, tmp_path: Path) -> None:
    read = read_all(tmp_path)
    kinds = fake.info["kinds"]
    by_judge: dict[str, list[dict]] = {}
    for j in read.imported:
        assert j["origin"] == "imported" and j["record_id"] in kinds
        by_judge.setdefault(j["judge"], []).append(j)
    assert set(by_judge) == {"hallucination", "helpful", "tone"}
    assert all(j["status"] == "ok" for j in read.imported)
    hall = by_judge["hallucination"]
    assert all(0 <= j["value"] <= 1 for j in hall)
    assert any(j["explanation"] == "claims checked against the context" for j in hall)
    assert {j["record_id"] for j in hall} >= {"gen-hidden-0"}
    assert {(j["value"], j["passed"]) for j in by_judge["helpful"]} == {(0.0, False), (1.0, True)}
    assert {(j["value"], j["label"]) for j in by_judge["tone"]} == {(None, "neutral")}
    stats = read.fingerprint["stats"]
    assert stats["resolved_by_id"] == 1 and stats["unresolved"] == 1
    # trace-level user_feedback (7) and the span-level scores (4) are not about generations
    assert stats["scores_out_of_scope"] == 7 + 4
    hidden = read.by_id()["gen-hidden-0"]
    assert json.loads(hidden["metadata"])["resolved_by_id"] is True
    [ghost] = [r for r in read.rejects if "gen-ghost-0" in r["location"]]
    assert "sc-ghost" in ghost["reason"]


def test_traces(fake: FakeLangfuse, tmp_path: Path) -> None:
    read = read_all(tmp_path, read="traces")
    records = read.by_id()
    assert sorted(records) == sorted(fake.traces)
    trace = records["trace-00003"]
    assert trace["trace_id"] == "trace-00003" and trace["session_id"] == "sess-3"
    feedback = [j for j in read.imported if j["judge"] == "user_feedback"]
    assert sorted(j["record_id"] for j in feedback) == [f"trace-{i:05d}" for i in range(0, 40, 6)]
    assert all(j["judge"] == "user_feedback" for j in read.imported)


def test_filters(fake: FakeLangfuse, tmp_path: Path) -> None:
    kinds = fake.info["kinds"]
    beta = read_all(tmp_path / "a", tags=["beta"], import_scores=False).by_id()
    assert beta and all(int(r.split("-")[1]) % 3 == 0 for r in beta)
    assert any("filter" in q for _, path, q in fake.requests if path == _obs_path(fake))
    errors = read_all(tmp_path / "b", level="ERROR", import_scores=False).by_id()
    assert {kinds[r] for r in errors} == {"envelope", "null"}
    spans = read_all(tmp_path / "c", types=["SPAN"], import_scores=False).by_id()
    assert len(spans) == 40 and all(r.startswith("span-") for r in spans)


def test_retries_honour_retry_after(fake: FakeLangfuse, tmp_path: Path) -> None:
    path = _obs_path(fake)
    fake.faults += [Fault(path, 524), Fault(path, 429, times=2, retry_after="0.3"),
                    Fault(path, 503, retry_after="0.05")]
    t0 = time.monotonic()
    read = read_all(tmp_path, import_scores=False, concurrency=1)
    assert time.monotonic() - t0 >= 0.6
    stats = read.fingerprint["stats"]
    assert stats["rate_limited"] == 2 and stats["retries"] == 4
    assert read.fingerprint["complete"] and len(read.by_id()) == 80


def test_a_429_pauses_every_request_and_is_retried_past_max_retries(
        fake: FakeLangfuse, tmp_path: Path) -> None:
    path = _obs_path(fake)
    fake.faults += [Fault(path, 429, times=8, retry_after="0.05")]
    read = read_all(tmp_path, import_scores=False, concurrency=4, max_retries=1)
    stats = read.fingerprint["stats"]
    assert read.fingerprint["complete"] and len(read.by_id()) == 80  # not one page lost
    assert stats["rate_limited"] == 8 and stats["paused_s"] >= 0.05
    assert stats["rate_per_s"] is not None  # it slowed itself down


def test_the_429_budget_runs_from_the_first_refusal(fake_v4: FakeLangfuse) -> None:
    """A request that queued (here behind one holding the only call slot) longer than
    rate_limit_budget_s is still retried when it is then refused: queueing is not retrying."""
    path = _obs_path(fake_v4)
    fake_v4.faults += [Fault(path, 429, retry_after="0")]

    async def go() -> Any:
        async with LangfuseClient(fake_v4.url, concurrency=1, rate_limit_budget_s=0.3) as c:
            async def hold() -> None:
                async with c._semaphore:
                    await asyncio.sleep(0.5)
            holder = asyncio.create_task(hold())
            await asyncio.sleep(0)
            page = await c.get(path, {"limit": 1})
            await holder
            return page, c.stats.rate_limited

    page, refused = asyncio.run(go())
    assert refused == 1 and "data" in page


def test_requests_past_their_429_budget_fail_then_not_one_a_probe(fake_v4: FakeLangfuse) -> None:
    """Every request refused, no header: the client goes half-open (one probe at a time,
    up to 1 s apart) and a request whose rate_limit_budget_s is spent fails while it waits
    its turn to probe (before: one a probe, 8 requests about 8 s)."""
    path = _obs_path(fake_v4)
    fake_v4.faults += [Fault(path, 429, times=100_000)]

    async def one(c: LangfuseClient) -> str:
        try:
            await c.get(path, {"limit": 1})
        except SourceError as exc:
            return str(exc)
        return "answered"

    async def go() -> list[str]:
        async with LangfuseClient(fake_v4.url, concurrency=8, rate_limit_budget_s=0.3) as c:
            return await asyncio.gather(*(one(c) for _ in range(8)))

    t0 = time.monotonic()
    errors = asyncio.run(go())
    # the budget, the refusals before it goes half-open and a probe's wait (up to 1 s), with
    # room for a busy machine
    assert time.monotonic() - t0 < 4.0
    assert all("still rate-limited after 0.3 s" in e for e in errors), errors


@pytest.mark.parametrize("body", [b"<html><body>Sign in</body></html>", b"", b'{"data": [',
                                  b"\xff\xfe not utf-8"])
@pytest.mark.parametrize("after", [0, 1])
def test_a_page_that_is_not_json_stops_its_stream_with_a_reject(
        fake: FakeLangfuse, tmp_path: Path, body: bytes, after: int) -> None:
    """A 200 whose body is not JSON (a proxy's login page, a cut connection) is a fault of
    the listing: its stream stops with a reject that says so, and what was read stays."""
    fake.faults.append(Fault(_obs_path(fake), 200, raw=body, after=after))
    read = read_all(tmp_path, import_scores=False, concurrency=1, shards=1, page_size=10)
    stopped = [r for r in read.rejects if "stopped" in r["reason"]]
    assert len(stopped) == 1 and "not JSON" in stopped[0]["reason"], read.rejects
    assert not read.fingerprint["complete"]
    assert len(read.by_id()) == (10 if after else 0)


def test_too_heavy_halves_the_page_size(fake: FakeLangfuse, tmp_path: Path) -> None:
    fake.heavy_limit = 7
    read = read_all(tmp_path, shards=1)
    assert read.fingerprint["stats"]["too_heavy"] > 0
    assert read.fingerprint["complete"]
    assert sorted(read.by_id()) == sorted(fake.info["kinds"])
    assert read.fingerprint["stats"]["duplicates"] == 0


def test_detection_and_generation_mismatch(fake_v3: FakeLangfuse, tmp_path: Path) -> None:
    read = read_all(tmp_path / "a", import_scores=False)
    assert read.fingerprint["api"] == "v3"
    assert fake_v3.requests[0][1] == "/api/public/v2/observations"  # the probe, 404
    with pytest.raises(SourceError, match="does not serve the API generation 'v4'"):
        read_all(tmp_path / "b", api="v4")
    fake_v3.v2_opt_in = True  # LANGFUSE_MIGRATION_V4_ALLOW_PREVIEW_OPT_IN
    assert read_all(tmp_path / "c", import_scores=False).fingerprint["api"] == "v4"
    # the probe is the first page of each listing, not a request of its own
    assert all(q["limit"] == "1000" for _, p, q in fake_v3.requests
               if p == "/api/public/v2/observations")


def test_bad_keys_fail_clearly(fake: FakeLangfuse, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong")
    with pytest.raises(SourceError, match="answered 401: check LANGFUSE_PUBLIC_KEY"):
        read_all(tmp_path)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    with pytest.raises(SourceError, match="LANGFUSE_SECRET_KEY not set"):
        read_all(tmp_path)


def test_resume_after_interruption(fake: FakeLangfuse, tmp_path: Path) -> None:
    path = _obs_path(fake)
    # on the first page: a value that cannot fill the record column it is mapped to
    bad = _obs("gen-bad-0", "trace-00039", "GENERATION", "llm-call",
               parse("2026-05-01T23:59:00Z"), parse("2026-05-01T23:59:01Z"), None, "q", "a", 1)
    bad["metadata"] = {"confidence": "high"}
    fake.add_observation(bad)
    fake.faults.append(Fault(path, 500, times=100, after=4))
    opts = {"page_size": 10, "shards": 1, "concurrency": 1, "max_retries": 0,
            "fields": {"confidence": "metadata.confidence"}}
    first: list = []
    with pytest.raises(SourceError, match="failed after 1 attempts"):
        source, _ = make_source(tmp_path, **opts)
        for item in source.read():
            if isinstance(item, pa.Table):  # (not a reject)
                first.extend(item.column("record_id").to_pylist())
    state = list((tmp_path / "runs" / ".state" / "lf").glob("langfuse-*.json"))
    assert len(state) == 1
    [done] = [s for k, s in json.loads(state[0].read_text())["streams"].items()
              if k.startswith("rec-")]
    fake.faults.clear()
    n_before = len(fake.requests)
    read = read_all(tmp_path, **opts)
    assert read.fingerprint["resumed"] and read.fingerprint["complete"]
    # found by the first read, kept for the run that completes it
    [reject] = [r for r in read.rejects if r["reason"].startswith("cannot map")]
    assert "page 1 item 0" in reject["location"] and "gen-bad-0" in reject["raw"]
    assert sorted(read.by_id()) == sorted(fake.info["kinds"])
    assert read.records.num_rows == len(read.by_id())
    # the pages read before are not read again (the aborted read's last request, in flight
    # when it failed, may reach the server late: only pages it finished count)
    again = [q for _, p, q in fake.requests[n_before:]
             if p == path and "filter" not in q]  # not the look-ups by id
    if fake.generation == "v3":
        assert done["pages_done"] and not {int(q["page"]) for q in again} & \
            set(done["pages_done"])
    else:
        assert done["cursor"] and again and all(q.get("cursor") for q in again)
    assert len(again) <= math.ceil(81 / 10)
    assert not state[0].exists()  # done: the progress is dropped


def test_incremental_reads_only_what_is_new(fake: FakeLangfuse, tmp_path: Path) -> None:
    first = read_all(tmp_path, to_time="2026-05-01T12:00:00Z", import_scores=False)
    run = tmp_path / "runs" / "lf" / "run-1"
    run.mkdir(parents=True)
    write_json({"run_id": "run-1", "status": "ok", "sources": {"source": first.fingerprint}},
               run / "manifest.json")
    later = read_all(tmp_path, incremental=True, import_scores=False)
    assert later.fingerprint["incremental_after"] == "run-1"
    assert later.fingerprint["window"]["from"] == "2026-05-01T12:00:00.000Z"
    before = set(first.by_id())
    after = set(later.by_id())
    assert before and after and not before & after
    assert before | after == set(fake.info["kinds"]) - {"gen-hidden-0"}


def test_lagging_observation_is_found_on_retry(fake: FakeLangfuse, tmp_path: Path) -> None:
    t0 = parse("2026-05-01T06:00:00Z")
    fake.add_observation(_obs("gen-late-0", "trace-00010", "GENERATION", "llm-call", t0, t0,
                              None, "q", "a", 1), lag_s=0.5)
    fake.hidden_from_list.add("gen-late-0")
    fake.add_score(score("sc-late", "hallucination", "NUMERIC", t0, observation="gen-late-0",
                         trace="trace-00010", value=0.3))
    read = read_all(tmp_path, resolve_retry_s=0.6)
    assert "gen-late-0" in read.by_id()
    assert any(j["record_id"] == "gen-late-0" for j in read.imported)


def test_expand_metadata(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    def note(**kw: object) -> str:
        rec = read_all(tmp_path / str(len(kw)), import_scores=False, **kw).by_id()["gen-00002-0"]
        return json.loads(rec["metadata"])["metadata"]["note"]

    assert len(note()) == 200
    assert len(note(expand_metadata=["note"])) == 250


def test_custom_fields(fake: FakeLangfuse, tmp_path: Path) -> None:
    kinds = fake.info["kinds"]
    records = read_all(tmp_path, fields={"reference": "metadata.tenant",
                                         "final_output": "output.content"},
                       import_scores=False).by_id()
    for rid, rec in records.items():
        assert rec["reference"] == "acme"
        if kinds[rid] == "ok" and rid != "gen-hidden-0":
            assert rec["final_output"].startswith("Here is the answer")


def test_custom_fields_with_fallback_paths(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    """A custom field may list paths: a record's first non-null value wins; a time path among
    the fallbacks asks v2 for the time group."""
    records = read_all(tmp_path, import_scores=False,
                       fields={"reference": ["metadata.absent", "metadata.tenant"],
                               "final_output": ["nothing.here", "updatedAt"]}).by_id()
    assert records and all(r["reference"] == "acme" for r in records.values())
    assert all(r["final_output"] for r in records.values())
    groups = [set(q["fields"].split(",")) for _, p, q in fake_v4.requests
              if p == "/api/public/v2/observations"]
    assert groups and all("time" in g for g in groups)


def test_time_fields_only_when_a_custom_field_reads_them(fake_v4: FakeLangfuse,
                                                         tmp_path: Path) -> None:
    def groups() -> list[set[str]]:
        return [set(q["fields"].split(",")) for _, p, q in fake_v4.requests
                if p == "/api/public/v2/observations"]

    plain = read_all(tmp_path / "a", import_scores=False).by_id()
    assert plain and all("time" not in g and "io" in g for g in groups())
    fake_v4.requests.clear()
    records = read_all(tmp_path / "b", import_scores=False,
                       fields={"reference": "updatedAt"}).by_id()
    assert all("time" in g for g in groups())
    assert all(parse(r["reference"]) == r["timestamp"] for r in records.values())
    for rec in (*records.values(), *plain.values()):
        rec.pop("reference")
    assert records == plain


@pytest.fixture
def fake_v4_unchecked(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    """A v4 fake that serves values outside the spec."""
    yield from _serve("v4", monkeypatch, n_traces=4, validate=False)


def test_odd_values_map_or_reject_their_record_alone(fake_v4_unchecked: FakeLangfuse,
                                                     tmp_path: Path) -> None:
    fake = fake_v4_unchecked
    naive, bad = odd_observations()
    fake.add_observation(naive)
    fake.add_observation(bad)
    read = read_all(tmp_path, import_scores=False)
    records = read.by_id()
    # read as UTC, like the other forms
    assert records["gen-naive-0"]["timestamp"] == parse("2026-05-01T10:00:00Z")
    assert "gen-badlevel-0" not in records
    [reject] = read.rejects
    assert "record gen-badlevel-0" in reject["location"]
    assert reject["reason"].startswith("bad value")
    assert set(records) == set(fake.info["kinds"]) - {"gen-hidden-0"} | {"gen-naive-0"}


@pytest.mark.parametrize("body, cursor", [
    (b'{"data":[],"meta":{"cursor":"c1"}}', "c1"),
    (b'{"data":[{"id":"o"}],"meta":{}}', None),  # the last page
    (b'{"data":[{"x":1,"meta":{"cursor":"no"}}],"meta":{"cursor":"c2"}}', "c2"),
    # meta before data: the last "meta" in the body is an item's, so the page is parsed
    (b'{"meta":{"cursor":"c3"},"data":[{"x":1,"meta":{"cursor":"no"}}]}', "c3"),
    (b'{"meta":{"cursor":"c4"},"data":[],"x":{"meta":{"cursor":"no"}}}', "c4"),
    (b'{"data":[],"a\\"meta":{"cursor":"no"}}', None),  # a key ending in "meta"
    (json.dumps({"data": [], "meta": {"cursor": "c5"}}, indent=2).encode(), "c5"),
])
def test_the_cursor_is_read_from_the_end_of_a_page(body: bytes, cursor: str | None) -> None:
    assert _meta_cursor(body) == cursor


@pytest.mark.parametrize("changes, message", [
    ({"api": "v5"}, "api: 'v5' is not one of"),
    ({"types": ["GEN"]}, "types: 'GEN' is not one of"),
    ({"from_time": "2026-05-02T00:00:00Z", "to_time": "2026-05-01T00:00:00Z"}, "before"),
    ({"from_time": "yesterday"}, "not an ISO-8601"),
    ({"secret_key": "sk-lf-1"}, "LANGFUSE_SECRET_KEY instead"),
    ({"fields": {"answer": "output"}}, "fields.answer: not a record column"),
])
def test_config_validation(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LangfuseSourceConfig(**changes).validate()


def test_the_spec_check_catches_drift() -> None:
    """The validator the fake runs on every answer rejects what the real API would not send."""
    spec = SpecValidator()
    bad_obs = {"data": [{"id": "o1", "startTime": "2026-05-01T00:00:00Z"}], "meta": {}}
    assert any("traceId" in e for e in spec.errors("ObservationsV2Response", bad_obs))
    bad_score = {"data": [{"dataType": "BOOLEAN", "value": "yes"}], "meta": {"limit": 1}}
    assert spec.errors("GetScoresV3Response", bad_score)
    assert spec.errors("legacyObservationsViews", {"data": [], "meta": {"page": 1}})


def test_the_fakes_type_index_selects_what_a_scan_selects() -> None:
    server = FakeLangfuse("v4", validate=False)
    make_dataset(server, 40, parse("2026-05-01T00:00:00Z"), parse("2026-05-02T00:00:00Z"))
    window = {"fromStartTime": "2026-05-01T03:00:00.000Z", "toStartTime": "2026-05-01T20:00:00Z"}
    for q in ({"type": "GENERATION"}, {"type": "SPAN", **window}, {"type": "GENERATION",
              "level": "ERROR", **window}, {"type": "EVENT"}, {"level": "ERROR", **window}):
        start = parse(q.get("fromStartTime", "2000-01-01T00:00:00Z")).timestamp()
        end = parse(q.get("toStartTime", "2100-01-01T00:00:00Z")).timestamp()
        scan = [(t, oid) for t, oid in server._index() if start <= t < end
                and all(server.observations[oid].get(k) == v for k, v in q.items()
                        if k in ("type", "level"))]
        assert server._matching(q, None, True) == scan, q
        assert scan or q["type"] == "EVENT"
