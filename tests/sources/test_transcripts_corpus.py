"""``transcripts`` on real, public session files (``tests/sources/corpus``, licences in its
LICENSES.md): every record matches the hand count in ``corpus/expectations.yaml``, tokens,
latency and tool calls included."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from evalkit.sources.transcripts import TranscriptsConfig, TranscriptsSource
from tests.sources.conftest import read_collecting

CORPUS = Path(__file__).resolve().parent / "corpus"
EXPECTED: dict[str, Any] = {
    name: spec for name, spec in yaml.safe_load((CORPUS / "expectations.yaml").read_text()).items()
    if not name.startswith("otlp/")}  # those are test_otlp_json's


@pytest.fixture(scope="module")
def read_corpus(tmp_path_factory):
    """Each corpus file read on its own: (records by id, the source's counts, rejects)."""
    out = {}
    for name in EXPECTED:
        ctx = SimpleNamespace(run_id="r1", run_dir=tmp_path_factory.mktemp("run"),
                              rejects=[])
        src = TranscriptsSource("transcripts", TranscriptsConfig(path=str(CORPUS / name)), ctx)
        rows = read_collecting(src).to_pylist()
        for row in rows:
            row["metadata"] = json.loads(row["metadata"])
        out[name] = ({r["record_id"]: r for r in rows}, dict(src.counts), ctx.rejects)
    return out


def _starts(value: str | None, expected: str | None) -> bool:
    if expected is None:
        return value is None
    return value is not None and value.strip().startswith(expected)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_corpus_file_matches_its_hand_count(read_corpus, name):
    rows, counts, rejects = read_corpus[name]
    spec = EXPECTED[name]
    want_rejects = spec.get("rejects", [])
    assert [r["location"].rsplit(":", 1)[1] for r in rejects] == [
        str(r["line"]) for r in want_rejects]
    for got, want in zip(rejects, want_rejects, strict=True):
        assert want["reason"] in got["reason"]
    assert list(rows) == [r["id"] for r in spec["records"]]
    for key, value in spec["counts"].items():
        assert counts.get(key, 0) == value, key
    for want in spec["records"]:
        got = rows[want["id"]]
        meta = got["metadata"]
        found = {
            "trigger": meta["trigger"], "excluded_by": got["excluded_by"],
            "in": got["input_tokens"], "out": got["output_tokens"],
            "calls": meta["n_tool_calls"], "errors": meta["n_tool_errors"],
            "no_result": meta["n_tool_without_result"], "context": len(got["context"]),
            "interrupted": meta["interrupted"],
        }
        assert found == {k: want[k] for k in found}, want["id"]
        assert _starts(got["input"], want["input"]), (want["id"], got["input"])
        assert _starts(got["output"], want["output"]), (want["id"], got["output"])
        if want["latency"] is None:
            assert got["latency_s"] is None
        else:
            assert got["latency_s"] == pytest.approx(want["latency"], abs=1e-3)
        if want["excluded_by"] is not None:  # set aside, and says why
            assert got["exclude_reason"]


def test_a_resumed_session_repeating_its_history_is_read_once(tmp_path):
    """Claude Code's resume writes the earlier lines again (same uuids): each turn once."""
    lines = (CORPUS / "claude" / "tool_heavy.jsonl").read_text().splitlines()
    (tmp_path / "resumed.jsonl").write_text("\n".join(lines[:18] + lines) + "\n")
    ctx = SimpleNamespace(run_id="r1", run_dir=tmp_path / "run", rejects=[])
    src = TranscriptsSource("t", TranscriptsConfig(path=str(tmp_path / "resumed.jsonl")), ctx)
    rows = read_collecting(src).to_pylist()
    assert [(r["input"][:20], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("start phoenix in bac", 51808, 28), ("scrolling back in xt", 54173, 184)]
    assert src.counts["repeated_events"] == 18 - 3  # 3 of the first 18 lines have no uuid
    assert not ctx.rejects


def test_a_session_resumed_into_a_new_file_goes_on_numbering_its_turns(tmp_path):
    """The new file repeats the old one's lines, then goes on: the old turn once, the new one
    numbered after it."""
    lines = (CORPUS / "claude" / "tool_heavy.jsonl").read_text().splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:18]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines) + "\n")
    ctx = SimpleNamespace(run_id="r1", run_dir=tmp_path / "run", rejects=[])
    src = TranscriptsSource("t", TranscriptsConfig(path=str(tmp_path)), ctx)
    rows = read_collecting(src).to_pylist()
    sid = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
    assert [(r["record_id"], Path(json.loads(r["metadata"])["file"]).name) for r in rows] == [
        (f"{sid}:0", "a.jsonl"), (f"{sid}:1", "b.jsonl")]
    assert not ctx.rejects


_CODEX = sorted(n for n in EXPECTED if n.startswith("codex/"))


@pytest.mark.parametrize("names", [("claude/short.jsonl", "claude/tool_heavy.jsonl"),
                                   ("claude/subagent.jsonl", "claude/short.jsonl",
                                    "claude/images-in-user-messages.jsonl"),
                                   # Codex's token counts are running totals per session:
                                   # the second's were taken less the first's
                                   tuple(_CODEX), tuple(reversed(_CODEX))])
def test_sessions_in_one_file_are_each_their_own(read_corpus, tmp_path, names):
    """Session logs joined into one file (`cat *.jsonl > all.jsonl`, an export of several):
    each event's sessionId says whose turn it is. The first session's id was given to every
    turn, numbered on across the others, with no word."""
    path = tmp_path / "all.jsonl"
    path.write_text("".join((CORPUS / n).read_text().rstrip("\n") + "\n" for n in names))
    ctx = SimpleNamespace(run_id="r1", run_dir=tmp_path / "run", rejects=[])
    src = TranscriptsSource("t", TranscriptsConfig(path=str(path)), ctx)
    rows = read_collecting(src).to_pylist()
    alone = [r for n in names for r in read_corpus[n][0].values()]
    keys = ("record_id", "session_id", "input", "output", "input_tokens", "output_tokens",
            "latency_s", "excluded_by")
    assert [tuple(r[k] for k in keys) for r in rows] == \
        [tuple(r[k] for k in keys) for r in alone]
    assert len(ctx.rejects) == sum(len(read_corpus[n][2]) for n in names)
    for key in ("ignored_events", "repeated_events", "local_commands"):
        assert src.counts.get(key, 0) == sum(read_corpus[n][1].get(key, 0) for n in names)


def test_a_file_that_repeats_another_sessions_history_then_goes_on(tmp_path):
    """A file that opens with another session's events (read already from that session's
    own file) and goes on under its own id: the history is counted as repeated, the new
    turns are the new session's, and nothing is rejected."""
    lines = (CORPUS / "claude" / "tool_heavy.jsonl").read_text().splitlines()
    old, new = "d6e0bada-1959-4eec-a9d2-0bfade768d8f", "ffffffff-2222-4333-8444-555555555555"
    (tmp_path / f"{old}.jsonl").write_text("\n".join(lines[:18]) + "\n")
    (tmp_path / f"{new}.jsonl").write_text("\n".join(
        lines[:18] + [x.replace(old, new) for x in lines[18:]]) + "\n")
    ctx = SimpleNamespace(run_id="r1", run_dir=tmp_path / "run", rejects=[])
    src = TranscriptsSource("t", TranscriptsConfig(path=str(tmp_path)), ctx)
    rows = read_collecting(src).to_pylist()
    assert [(r["record_id"], r["input"][:20]) for r in rows] == [
        (f"{old}:0", "start phoenix in bac"), (f"{new}:0", "scrolling back in xt")]
    assert not ctx.rejects
