"""``evalkit compact`` rewrites only runs nothing will write again: a failed or interrupted
run is resumable, and its resume counts the judgment parts its kept batches wrote; a runs
directory that does not exist is an error, not "0 runs compacted". Hand-made runs: fast."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.commands import compact
from evalkit.errors import QueryError


def _run(root: Path, status: str) -> Path:
    d = root / "runs" / "quickstart" / f"run-{status}"
    (d / "judgments").mkdir(parents=True)
    for i in range(3):
        pq.write_table(pa.table({"run_id": [d.name], "record_id": [str(i)]}),
                       d / "judgments" / f"part-{i:05d}.parquet")
    (d / "manifest.json").write_text(json.dumps({"run_id": d.name, "status": status}))
    return d


@pytest.mark.parametrize("status", ["failed", "interrupted", "running"])
def test_a_resumable_run_keeps_its_parts(tmp_path: Path, status: str) -> None:
    d = _run(tmp_path, status)
    assert compact.compact_run(d) is None
    assert sorted(p.name for p in (d / "judgments").iterdir()) == [
        "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]


def test_a_finished_run_is_compacted(tmp_path: Path) -> None:
    d = _run(tmp_path, "ok")
    assert compact.compact_run(d) == 3
    assert [p.name for p in (d / "judgments").iterdir()] == ["part-00000.parquet"]
    assert pq.read_table(d / "judgments").column("record_id").to_pylist() == ["0", "1", "2"]


def test_a_missing_runs_dir_is_a_one_line_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = compact.main(argparse.Namespace(runs=[], runs_dir=str(tmp_path / "nowhere")))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--runs-dir" in err and "nowhere" in err


def test_a_connection_made_before_compact_reads_the_same_rows_after(tmp_path: Path) -> None:
    import evalkit

    d = _run(tmp_path, "ok")
    con = evalkit.connect(str(tmp_path / "runs"))
    query = "SELECT record_id FROM judgments ORDER BY record_id"
    before = con.sql(query).fetchall()
    assert before == [("0",), ("1",), ("2",)]
    assert compact.compact_run(d) == 3
    assert con.sql(query).fetchall() == before  # not "No files found ... part-00001.parquet"
    with pytest.raises(QueryError, match="no_such_column"):  # a bad query is not retried
        con.sql("SELECT no_such_column FROM judgments").fetchall()


def test_a_run_another_compact_is_at_is_left_to_it(tmp_path: Path) -> None:
    import fcntl
    import os

    d = _run(tmp_path, "ok")
    theirs = d / ".judgments-new-999999"  # the other compact's file, being written
    theirs.mkdir()
    fd = os.open(d, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert compact.compact_run(d) is None
        assert theirs.is_dir() and len(list((d / "judgments").iterdir())) == 3
    finally:
        os.close(fd)
    assert compact.compact_run(d) == 3
