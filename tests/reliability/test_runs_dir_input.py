"""A runs directory is input too (docs/reliability.md, "A runs directory is input"): what a
reader takes from it is checked. A FIFO or ``/dev/zero`` as a manifest or a lock, a manifest
too large, not an object or of the wrong types, a table that is not Parquet, not a regular
file or of another schema: one warning line naming the file, and the other runs are still
served by ``query``, ``report``, ``report --index`` and ``compare``. ``merge`` and
``compact`` killed at any step leave nothing that reads as a run, and merging again does not
double the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.e2e  # evalkit in a subprocess: a reader that hangs must not hang us

EVALKIT = str(Path(sys.executable).with_name("evalkit"))


def _evalkit(*args: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    full.pop("EVALKIT_FAULT", None) if env is None or "EVALKIT_FAULT" not in env else None
    return subprocess.run([EVALKIT, *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)


def _runs(runs: Path) -> list[Path]:
    return sorted(p for p in (runs / "quickstart").iterdir() if not p.name.startswith("."))


def _count(runs: Path, sql: str) -> tuple[int, str]:
    proc = _evalkit("query", sql, "--runs-dir", str(runs), "--format", "json", cwd=runs.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)[0]["n"], proc.stderr


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    m = json.loads(path.read_text())
    m["padding"] = "x" * (17 << 20)
    path.write_text(json.dumps(m))


def _typed(key: str, value: object) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        m = json.loads(path.read_text())
        m[key] = value
        path.write_text(json.dumps(m))
    return damage


MANIFEST_DAMAGE = {
    "fifo": _fifo, "dev_zero": _dev_zero, "huge": _huge,
    "list": lambda p: p.write_text("[1, 2]"), "not_json": lambda p: p.write_text("{oops"),
    "n_records_text": _typed("n_records", "many"), "started_at_word": _typed("started_at",
                                                                            "yesterday"),
    "overrides_object": _typed("overrides", {"a": 1}), "status_number": _typed("status", 3),
}


def _copies(runs: Path, damages: dict[str, Callable[[Path], None]], file: str) -> list[Path]:
    """A copy of the first run per damage, its ``file`` damaged so."""
    import shutil

    first = _runs(runs)[0]
    out = []
    for name, damage in sorted(damages.items()):
        copy = first.parent / f"{first.name}-{name}"
        shutil.copytree(first, copy)
        damage(copy / file)
        out.append(copy / file)
    return out


def test_odd_manifests_are_one_line_each_and_the_other_runs_are_served(
        shard_runs: Path) -> None:
    good = _runs(shard_runs)
    bad = _copies(shard_runs, MANIFEST_DAMAGE, "manifest.json")
    n, err = _count(shard_runs, "SELECT count(*) AS n FROM runs")
    assert n == len(good)
    lines = err.strip().splitlines()
    assert len(lines) == len(bad) and all(str(b) in "\n".join(lines) for b in bad), err
    n, _ = _count(shard_runs, "SELECT count(DISTINCT run_id) AS n FROM records")
    assert n == len(good)
    index = _evalkit("report", "--index", str(shard_runs), cwd=shard_runs.parent)
    assert index.returncode == 0 and "Traceback" not in index.stderr, index.stderr[-3000:]
    assert len(index.stderr.strip().splitlines()) == len(bad)
    assert all(g.name in (shard_runs / "index.html").read_text() for g in good)
    for path in bad[:3]:  # (fifo, dev_zero, huge, in name order: list, n_records_text...)
        one = _evalkit("report", str(path.parent), cwd=shard_runs.parent)
        assert one.returncode == 2 and one.stderr.count("\n") == 1, one.stderr
        assert str(path) in one.stderr


@pytest.mark.parametrize("lock", ["fifo", "dev_zero"])
def test_an_odd_lock_never_hangs_a_reader(shard_runs: Path, lock: str) -> None:
    bad, _good = _runs(shard_runs)
    _typed("status", "running")(bad / "manifest.json")
    (bad / ".lock").write_text("1")
    (_fifo if lock == "fifo" else _dev_zero)(bad / ".lock")
    n, _ = _count(shard_runs, "SELECT count(*) AS n FROM runs")
    assert n == 2


def _text_metrics(path: Path) -> None:
    table = pq.read_table(path)
    i = table.schema.get_field_index("value")
    table = table.set_column(i, "value", pa.array([str(v) for v in table.column("value")
                                                  .to_pylist()], pa.string()))
    pq.write_table(table, path)


TABLE_DAMAGE = {
    "not_parquet": lambda p: p.write_text("not parquet"), "fifo": _fifo, "dev_zero": _dev_zero,
    "value_as_text": _text_metrics, "empty": lambda p: p.write_bytes(b""),
}


def test_odd_tables_are_one_line_each_and_the_other_runs_are_served(shard_runs: Path) -> None:
    good = _runs(shard_runs)
    bad = _copies(shard_runs, TABLE_DAMAGE, "metrics.parquet")
    for path in bad:  # (each copy's own run id, so its rows would show if read)
        m = json.loads((path.parent / "manifest.json").read_text())
        m["run_id"] = path.parent.name
        (path.parent / "manifest.json").write_text(json.dumps(m))
    n, err = _count(shard_runs, "SELECT count(*) AS n FROM metrics WHERE value >= 0")
    want = sum(_count(shard_runs, f"SELECT count(*) AS n FROM metrics WHERE run_id = "
                                  f"'{g.name}' AND value >= 0")[0] for g in good)
    assert n == want > 0
    lines = err.strip().splitlines()
    assert len(lines) == len(bad) and all(str(b) in "\n".join(lines) for b in bad), err
    index = _evalkit("report", "--index", str(shard_runs), cwd=shard_runs.parent)
    assert index.returncode == 0 and "Traceback" not in index.stderr, index.stderr[-3000:]
    for path in bad[:2]:
        for command in (["report", str(path.parent)],
                        ["compare", str(good[0]), str(path.parent), "--n-boot", "0"]):
            proc = _evalkit(*command, cwd=shard_runs.parent)
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (
                command, proc.stderr[-3000:])
            assert str(path) in proc.stderr


MERGE_POINTS = ["merge_records", "merge_written", "merge_renamed"]
COMPACT_POINTS = ["compact_written", "compact_swapped"]


def _total(runs: Path, table: str) -> int:
    """Rows of ``table`` over every finished run (in-process: no odd file here)."""
    from evalkit.results.query import connect, run_query

    con = connect(runs)
    try:
        return run_query(con, f"SELECT count(*) FROM {table}")[1][0][0]
    finally:
        con.close()


@pytest.mark.parametrize("point", MERGE_POINTS)
def test_merge_killed_at_any_step_leaves_no_run_and_merges_once(shard_runs: Path,
                                                                point: str) -> None:
    shards = _runs(shard_runs)
    records = _total(shard_runs, "records")
    killed = _evalkit("merge", "--runs-dir", str(shard_runs), *(d.name for d in shards),
                      cwd=shard_runs.parent, env={"EVALKIT_FAULT": f"kill@{point}"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    after_kill = _total(shard_runs, "records")
    assert after_kill in (records, 2 * records)  # the merged run is whole, or not there
    again = _evalkit("merge", "--runs-dir", str(shard_runs), *(d.name for d in shards),
                     cwd=shard_runs.parent)
    if after_kill == records:
        assert again.returncode == 0, again.stderr[-3000:]
    else:  # it was renamed into place before the kill: merging again is refused
        assert again.returncode == 2 and "already merged" in again.stderr, again.stderr
    assert _total(shard_runs, "records") == 2 * records
    assert _total(shard_runs, "runs") == 3
    hidden = [p for p in (shard_runs / "quickstart").iterdir() if p.name.startswith(".")]
    assert not hidden, hidden


@pytest.mark.parametrize("point", COMPACT_POINTS)
def test_compact_killed_at_any_step_keeps_every_judgment(shard_runs: Path, point: str) -> None:
    before = _total(shard_runs, "judgments")
    killed = _evalkit("compact", "--runs-dir", str(shard_runs), cwd=shard_runs.parent,
                      env={"EVALKIT_FAULT": f"kill@{point}"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert _total(shard_runs, "judgments") == before
    done = _evalkit("compact", "--runs-dir", str(shard_runs), cwd=shard_runs.parent)
    assert done.returncode == 0, done.stderr
    assert _total(shard_runs, "judgments") == before
    for run in _runs(shard_runs):
        assert [p.name for p in (run / "judgments").iterdir()] == ["part-00000.parquet"]
        assert not [p for p in run.iterdir() if p.name.startswith(".judgments-")]


def test_compact_leaves_a_run_with_an_odd_part_and_compacts_the_others(
        shard_runs: Path) -> None:
    bad, good = _runs(shard_runs)
    part = sorted((bad / "judgments").glob("part-*.parquet"))[-1]
    part.write_text("not parquet")
    proc = _evalkit("compact", "--runs-dir", str(shard_runs), cwd=shard_runs.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr
    assert [p.name for p in (good / "judgments").iterdir()] == ["part-00000.parquet"]
    assert len(list((bad / "judgments").iterdir())) > 1
