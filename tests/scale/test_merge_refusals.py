"""``evalkit merge`` given runs that are not every shard of one finished config: one line
naming the run and the fix, exit 2, and nothing written. Manifests only (no run): fast."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from evalkit.commands import merge


def _run(root: Path, run_id: str, shard: object = None, **extra: object) -> Path:
    d = root / "runs" / "audit" / run_id
    (d / "judgments").mkdir(parents=True)
    source: dict[str, object] = {"plugin": "jsonl", "path": "x.jsonl"}
    if shard is not None:
        source["shard"] = shard
    manifest = {"run_id": run_id, "experiment": "audit", "status": "ok",
                "config": {"source": source, "runner": {}}, **extra}  # (extra: status=...)
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def _merge(root: Path, *refs: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = merge.main(argparse.Namespace(runs=list(refs), runs_dir=str(root / "runs")))
    err = capsys.readouterr().err
    return code, err


def test_an_unsharded_run_is_refused_in_one_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "whole")
    _run(tmp_path, "s0", "0/2")
    _run(tmp_path, "s1", "1/2")
    for refs in (["whole"], ["whole", "s0", "s1"], ["s0", "whole", "s1"]):
        code, err = _merge(tmp_path, *refs, capsys=capsys)
        assert code == 2, err
        assert err.count("\n") == 1 and "whole" in err and "not a shard" in err
    assert sorted(p.name for p in (tmp_path / "runs" / "audit").iterdir()) == ["s0", "s1",
                                                                                "whole"]


def test_a_malformed_shard_in_a_manifest_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "s0", "0/2")
    _run(tmp_path, "bad", "x/2")
    code, err = _merge(tmp_path, "s0", "bad", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "bad" in err and "source.shard" in err


def test_shards_are_put_together_in_shard_order_past_ten(tmp_path: Path) -> None:
    manifests = [{"config": {"source": {"shard": f"{i}/12"}}} for i in (10, 2, 0, 11, 1)]
    dirs = [Path(f"r{i}") for i in range(5)]
    ordered = merge._in_shard_order(manifests, dirs)
    assert [m["config"]["source"]["shard"] for m, _ in ordered] == [
        "0/12", "1/12", "2/12", "10/12", "11/12"]


@pytest.mark.parametrize(("command", "hint"), [
    ("merge", None), ("compact", None), ("report", None), ("query", "--all-runs"),
    ("push", "--all-runs"), ("connect", "include_unfinished=True")])
def test_an_unfinished_run_is_refused_with_a_fix_the_command_has(
        tmp_path: Path, command: str, hint: str | None) -> None:
    from evalkit.commands._runs import find_run
    from evalkit.errors import EvalkitError

    _run(tmp_path, "s0", "0/2", status="failed")
    with pytest.raises(EvalkitError) as err:
        find_run("s0", tmp_path / "runs", command)
    text = str(err.value)
    assert "--resume s0" in text
    if hint is None:
        assert "--all-runs" not in text and "include_unfinished" not in text
    else:
        assert hint in text


def test_merge_waits_for_a_compact_of_its_shards(tmp_path: Path) -> None:
    import fcntl
    import os
    import threading

    dirs = [_run(tmp_path, "s0", "0/2"), _run(tmp_path, "s1", "1/2")]
    fd = os.open(dirs[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as evalkit compact holds a run it rewrites
    done = threading.Event()

    def work() -> None:
        with merge._held(dirs):
            done.set()
    t = threading.Thread(target=work)
    t.start()
    try:
        assert not done.wait(0.5)  # the merge waits for the swap
    finally:
        os.close(fd)
    t.join(5)
    assert done.is_set()
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evalkit.commands import compact

    for i in range(2):
        pq.write_table(pa.table({"record_id": [str(i)]}),
                       dirs[0] / "judgments" / f"part-{i:05d}.parquet")
    with merge._held(dirs):  # and a compact leaves the shards being read alone
        assert compact.compact_run(dirs[0]) is None
    assert compact.compact_run(dirs[0]) == 2
