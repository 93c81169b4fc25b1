"""``source.shard=i/n`` on Langfuse: shard i lists only its own slice of the time window, so the
shards of one evaluation fetch each observation once between them; together they are the
unsharded read, record for record, with every imported score and reject once, beside its
record. Their resume and incremental state stays their own."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fake_server import FakeLangfuse, Fault, _obs, parse, score

from evalkit.errors import ConfigError, SourceError
from evalkit.results.writer import write_json
from evalkit.sources.langfuse import LangfuseSource, LangfuseSourceConfig
from evalkit.sources.langfuse.source import time_slices
from evalkit.testing import read_source
from evalkit.testing.suites import SourceSuite
from tests.conftest import run_cli, run_dirs
from tests.sources.langfuse.conftest import FROM, TO, WINDOW, Read, make_source, read_all

CUTS = ["2026-05-01T00:00:00.000Z", "2026-05-01T06:00:00.000Z", "2026-05-01T12:00:00.000Z",
        "2026-05-01T18:00:00.000Z", "2026-05-02T00:00:00.000Z"]


def read_shard(tmp_path: Path, i: int, n: int, **overrides: Any) -> Read:
    source, _ = make_source(tmp_path, **overrides)
    assert source.shard(i, n) is True  # the source reads its own slice: no hash cut after it
    return Read(source, read_source(source.read()))


def _edges(fake: FakeLangfuse) -> None:
    """A generation exactly on the boundary of shards 0 and 1 (it is shard 1's: the slices
    are half-open), and one late in shard 0 whose only score falls in shard 1's slice."""
    t = parse(CUTS[1])
    fake.add_observation(_obs("gen-edge-0", "trace-00010", "GENERATION", "llm-call", t,
                              t + timedelta(seconds=1), None, "q", "an answer", 10))
    t = parse("2026-05-01T05:59:59.999Z")
    fake.add_observation(_obs("gen-late-0", "trace-00009", "GENERATION", "llm-call", t,
                              t + timedelta(seconds=1), None, "q", "an answer", 9))
    fake.add_score(score("sc-late", "hallucination", "NUMERIC", parse("2026-05-01T06:30:00Z"),
                         observation="gen-late-0", trace="trace-00009", value=0.25))


def _rows(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _listing(fake: FakeLangfuse) -> str:
    return "observations" if fake.generation == "v3" else "v2/observations"


def _windows(requests: list[tuple[str, str, dict[str, Any]]]) -> set[tuple[str, str]]:
    """The [from, to) of every request listing records (not the one-millisecond look-ups of a
    score target in another slice: whether a listing returns it)."""
    out = set()
    for _, path, q in requests:
        if path.endswith(("/observations", "/traces")) and "filter" not in q:
            out.add((q.get("fromStartTime") or q.get("fromTimestamp"),
                     q.get("toStartTime") or q.get("toTimestamp")))
        elif path.endswith("/observations") and "startTime" in q.get("filter", ""):
            conds = {c["operator"]: c["value"] for c in json.loads(q["filter"])
                     if c["column"] == "startTime"}
            out.add((conds[">="], conds["<"]))
    return {(a, b) for a, b in out if parse(b) - parse(a) != timedelta(milliseconds=1)}


def test_the_slices_are_half_open_and_cover_the_window() -> None:
    start, end = WINDOW
    slices = [time_slices(start, end, i, 4) for i in range(4)]
    assert [(a.isoformat(), b.isoformat()) for a, b in slices] == [
        (parse(CUTS[i]).isoformat(), parse(CUTS[i + 1]).isoformat()) for i in range(4)]
    # in whole milliseconds (what the API takes), each end the next start, on any machine
    odd = parse("2026-05-01T00:00:00.0004Z"), parse("2026-05-01T00:00:01.001Z")
    cuts = [time_slices(*odd, i, 7) for i in range(7)]
    assert all(a.microsecond % 1000 == 0 and b.microsecond % 1000 == 0 for a, b in cuts)
    assert all(cuts[i][1] == cuts[i + 1][0] for i in range(6))
    assert cuts[0][0] == parse("2026-05-01T00:00:00Z") and cuts[-1][1] == odd[1]


def test_time_shards_are_the_unsharded_read_fetched_once(fake: FakeLangfuse,
                                                         tmp_path: Path) -> None:
    _edges(fake)
    whole = read_all(tmp_path / "whole")
    served = dict(fake.served)
    fake.served.clear()
    shards, windows = [], []
    for i in range(4):
        n = len(fake.requests)
        shards.append(read_shard(tmp_path / f"s{i}", i, 4))
        windows.append(_windows(fake.requests[n:]))
    ids = [set(s.by_id()) for s in shards]
    assert all(ids) and sum(map(len, ids)) == len(set().union(*ids))  # each record once
    assert set().union(*ids) == set(whole.by_id())
    assert "gen-edge-0" in ids[1] and "gen-late-0" in ids[0]
    assert "gen-hidden-0" in set().union(*ids)  # missed by the listing, found by its score
    every = whole.by_id()
    assert all(row == every[rid] for s in shards for rid, row in s.by_id().items())
    # every imported score and reject once, in the shard of its record
    assert _rows([r for s in shards for r in s.imported]) == _rows(whole.imported)
    for s, own in zip(shards, ids, strict=True):
        assert {r["record_id"] for r in s.imported} <= own
    assert _rows([r for s in shards for r in s.rejects]) == _rows(whole.rejects)
    assert any("gen-ghost-0" in r["location"] for r in whole.rejects)
    # each shard asked only for its own slice of the window ...
    for i, got in enumerate(windows):
        assert got and all(CUTS[i] <= a < b <= CUTS[i + 1] for a, b in got), (i, got)
    # ... so the observations were fetched once between the shards, not four times; shard 1
    # looked gen-late-0 up by id (its score is in shard 1's slice) and found it listed
    assert fake.served[_listing(fake)] == served[_listing(fake)] + 1
    by_id = f"{_listing(fake)} by id"
    assert fake.served.get(by_id, 0) == served.get(by_id, 0) + 1
    for s in shards:
        fp = s.fingerprint
        assert fp["complete"] and fp["window"] == whole.fingerprint["window"]
        assert fp["shard"]["by"] == "time"


def test_a_target_the_listing_misses_is_found_whatever_slice_its_score_is_in(
        fake: FakeLangfuse, tmp_path: Path) -> None:
    t = parse("2026-05-01T02:00:00Z")  # shard 0's slice; its only score in shard 2's
    fake.add_observation(_obs("gen-lost-0", "trace-00003", "GENERATION", "llm-call", t,
                              t + timedelta(seconds=1), None, "q", "an answer", 3))
    fake.hidden_from_list.add("gen-lost-0")  # langfuse/langfuse#12842
    fake.add_score(score("sc-lost", "hallucination", "NUMERIC", parse("2026-05-01T13:00:00Z"),
                         observation="gen-lost-0", trace="trace-00003", value=0.5))
    whole = read_all(tmp_path / "whole")
    assert "gen-lost-0" in whole.by_id()
    shards = [read_shard(tmp_path / f"s{i}", i, 4) for i in range(4)]
    ids = [set(s.by_id()) for s in shards]
    assert sum(map(len, ids)) == len(set().union(*ids)) == len(whole.by_id())
    assert "gen-lost-0" in ids[2]  # no listing returns it: the shard that looked it up
    assert _rows([r for s in shards for r in s.imported]) == _rows(whole.imported)


def test_a_window_bound_finer_than_a_millisecond_cuts_as_the_listing_does(
        fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    t = parse(CUTS[0])  # on the window's first millisecond; its score in shard 2's slice
    fake_v4.add_observation(_obs("gen-first-0", "trace-00000", "GENERATION", "llm-call", t,
                                 t + timedelta(seconds=1), None, "q", "an answer", 0))
    fake_v4.add_score(score("sc-first", "hallucination", "NUMERIC",
                            parse("2026-05-01T13:00:00Z"), observation="gen-first-0",
                            trace="trace-00000", value=0.5))
    start = "2026-05-01T00:00:00.000400Z"  # the API takes milliseconds: .000
    whole = read_all(tmp_path / "whole", from_time=start)
    assert "gen-first-0" in whole.by_id()
    shards = [read_shard(tmp_path / f"s{i}", i, 4, from_time=start) for i in range(4)]
    ids = [set(s.by_id()) for s in shards]
    assert sum(map(len, ids)) == len(set().union(*ids)) == len(whole.by_id())
    assert "gen-first-0" in ids[0]


def test_traces_shard_by_time_too(fake: FakeLangfuse, tmp_path: Path) -> None:
    whole = read_all(tmp_path / "whole", read="traces")
    shards = [read_shard(tmp_path / f"s{i}", i, 3, read="traces") for i in range(3)]
    ids = [set(s.by_id()) for s in shards]
    assert sum(map(len, ids)) == len(set().union(*ids)) == len(whole.by_id())
    assert _rows([r for s in shards for r in s.imported]) == _rows(whole.imported)


def test_time_shards_need_a_window_end(tmp_path: Path) -> None:
    source, _ = make_source(tmp_path, to_time=None)
    with pytest.raises(ConfigError, match=r"source\.to_time.*source\.shard_by=record_id"):
        source.shard(0, 4)
    source, _ = make_source(tmp_path, to_time=None, shard_by="record_id")
    assert source.shard(0, 4) is False  # the runner keeps the records hashing to shard 0
    with pytest.raises(ValueError, match="shard_by: 'day' is not one of time, record_id"):
        LangfuseSourceConfig(shard_by="day").validate()


def test_a_shard_without_a_window_end_is_refused_before_the_run(tmp_path: Path) -> None:
    env = {"LANGFUSE_HOST": "http://127.0.0.1:9", "LANGFUSE_PUBLIC_KEY": "pk-lf-x",
           "LANGFUSE_SECRET_KEY": "sk-lf-x"}  # nothing listens: it must not be asked
    proc = run_cli("run", "+experiment=langfuse_audit", "source.shard=1/4", cwd=tmp_path,
                   env=env, check=False)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "source.to_time" in line and "source.shard_by=record_id" in line
    assert not (tmp_path / "runs" / "langfuse_audit").exists()


def test_shards_keep_their_own_resume_state(fake_v4: FakeLangfuse, tmp_path: Path) -> None:
    opts = {"page_size": 5, "shards": 1, "concurrency": 1, "max_retries": 0,
            "import_scores": False}
    expected = [set(read_shard(tmp_path / f"clean{i}", i, 2, **opts).by_id())
                for i in range(2)]
    fake_v4.faults.append(Fault("/api/public/v2/observations", 500, times=100, after=2))
    with pytest.raises(SourceError):
        read_shard(tmp_path, 0, 2, **opts)
    fake_v4.faults.clear()
    # shard 1 of the same sweep neither resumes nor clobbers shard 0's progress
    other = read_shard(tmp_path, 1, 2, **opts)
    assert not other.fingerprint["resumed"] and set(other.by_id()) == expected[1]
    again = read_shard(tmp_path, 0, 2, **opts)
    assert again.fingerprint["resumed"] and set(again.by_id()) == expected[0]
    assert not list((tmp_path / "runs" / ".state" / "lf").glob("langfuse-*.json"))


def _manifest(tmp_path: Path, run_id: str, read: Read, shard: str | None) -> None:
    run = tmp_path / "runs" / "lf" / run_id
    run.mkdir(parents=True)
    source = {"plugin": "langfuse", **({"shard": shard} if shard else {})}
    write_json({"run_id": run_id, "status": "ok", "config": {"source": source},
                "sources": {"source": read.fingerprint}}, run / "manifest.json")


def test_incremental_shards_of_one_sweep_read_one_window(fake_v4: FakeLangfuse,
                                                         tmp_path: Path) -> None:
    opts = {"incremental": True, "import_scores": False}
    first = read_shard(tmp_path, 0, 2, **opts)
    _manifest(tmp_path, "shard-0", first, "0/2")
    # a finished shard covers only its slice: the next shard's window is the same as its own
    second = read_shard(tmp_path, 1, 2, **opts)
    assert second.fingerprint["window"] == first.fingerprint["window"] == \
        {"from": CUTS[0], "to": CUTS[-1]}
    assert second.fingerprint["incremental_after"] is None
    assert set(first.by_id()) | set(second.by_id()) == \
        set(fake_v4.info["kinds"]) - {"gen-hidden-0"}  # (found through its score only)
    # the merged run (or an unsharded one) covers the window: the next read starts after it
    _manifest(tmp_path, "merged", first, None)
    later = read_shard(tmp_path, 0, 2, **{**opts, "to_time": "2026-05-03T00:00:00Z"})
    assert later.fingerprint["window"]["from"] == CUTS[-1]
    assert later.fingerprint["incremental_after"] == "merged"


def _table(con: duckdb.DuckDBPyConnection, run_dir: Path, sql: str) -> list[tuple]:
    return con.sql(sql.format(d=run_dir)).fetchall()


@pytest.mark.e2e
def test_time_shards_merge_into_the_unsharded_run(fake_v4: FakeLangfuse,
                                                  tmp_path: Path) -> None:
    _edges(fake_v4)
    common = ["+experiment=langfuse_audit", f"source.from_time={FROM}", f"source.to_time={TO}",
              "source.resolve_retry_s=0", "source.progress=false", "runner.summary=false"]
    run_cli("run", *common, "runner.run_id=whole", cwd=tmp_path)
    served = dict(fake_v4.served)
    fake_v4.served.clear()
    run_cli("run", "-m", *common, "source.shard=0/4,1/4,2/4,3/4", cwd=tmp_path)
    shards = [d for d in run_dirs(tmp_path, "langfuse_audit") if d.name != "whole"]
    assert len(shards) == 4
    # the shards fetched each observation once between them (and gen-late-0's start, once)
    assert fake_v4.served["v2/observations"] == served["v2/observations"] + 1
    proc = run_cli("merge", *(d.name for d in shards), cwd=tmp_path)
    merged = tmp_path / proc.stdout.split(" into ")[1].strip().rstrip("/")
    whole = tmp_path / "runs" / "langfuse_audit" / "whole"
    con = duckdb.connect()
    queries = [
        "SELECT * EXCLUDE (run_id) FROM '{d}/records.parquet' ORDER BY record_id",
        "SELECT record_id, judge, plugin, judge_model, value, label, passed, explanation, "
        "status, origin FROM read_parquet('{d}/judgments/*.parquet') ORDER BY ALL",
        "SELECT metric, slice, value, ci_low, ci_high, n_attempted, n_excluded, n_judged, "
        "n_unscored FROM '{d}/metrics.parquet' ORDER BY ALL",
        "SELECT location, reason, raw FROM '{d}/rejects.parquet' ORDER BY ALL",
    ]
    for sql in queries:
        got, want = _table(con, merged, sql), _table(con, whole, sql)
        assert got == want and want, sql
    manifest = json.loads((merged / "manifest.json").read_text())
    fp = manifest["sources"]["source"]
    assert fp["complete"] and fp["window"] == {"from": CUTS[0], "to": CUTS[-1]}
    assert "shard" not in fp


def test_merge_refuses_shards_of_different_windows(tmp_path: Path) -> None:
    from evalkit.commands.merge import merged_sources

    def manifest(to: str, complete: bool) -> dict[str, Any]:
        return {"sources": {"source": {
            "plugin": "langfuse", "window": {"from": CUTS[0], "to": to}, "complete": complete,
            "shard": {"index": 0, "count": 2, "by": "time"}, "stats": {"records": 3}}}}

    dirs = [tmp_path / "a", tmp_path / "b"]
    got = merged_sources([manifest(CUTS[-1], True), manifest(CUTS[-1], False)], dirs)
    assert got == {"source": {"plugin": "langfuse", "window": {"from": CUTS[0], "to": CUTS[-1]},
                              "complete": False, "stats": {"records": 6}}}
    with pytest.raises(ConfigError, match="merge: run .*b read source 'source' in the window"):
        merged_sources([manifest(CUTS[-1], True), manifest(CUTS[2], True)], dirs)


@pytest.mark.usefixtures("fake_v4")
class TestLangfuseConforms(SourceSuite):
    """The conformance suite's checks, the shards' included, against the fake server."""

    plugin = LangfuseSource
    settings = {"from_time": FROM, "to_time": TO, "resolve_retry_s": 0.0, "progress": False}


def test_record_id_shards_read_the_window_and_keep_their_hash(fake_v4: FakeLangfuse,
                                                              tmp_path: Path) -> None:
    from evalkit.runner.shard import runner_cut, sharded

    whole = read_all(tmp_path / "whole")
    fake_v4.served.clear()
    got = []
    for i in range(3):
        source, _ = make_source(tmp_path, shard_by="record_id")
        cut = runner_cut(source, (i, 3))
        assert cut == (i, 3)  # the runner cuts, by a hash of the record id
        got.append(Read(source, read_source(sharded(source.read(), cut))))
        assert got[-1].fingerprint["shard"] == {"index": i, "count": 3, "by": "record_id"}
    ids = [set(r.by_id()) for r in got]
    assert sum(map(len, ids)) == len(set().union(*ids)) == len(whole.by_id())
    assert _rows([r for s in got for r in s.imported]) == _rows(whole.imported)
    assert _rows([r for s in got for r in s.rejects]) == _rows(whole.rejects)
    # each shard read the whole window: three times the observations
    assert fake_v4.served["v2/observations"] == 3 * (len(whole.by_id()) - 1)  # (1 hidden)
