"""``evalkit compact --runs-dir s3://...``: the runs in a bucket end as a local compact leaves
them (one judgments file per finished run, every query's answer unchanged), and a compact
stopped at any step leaves them readable with the same answers; the next compact finishes
it. Staging objects that failed uploads left behind are removed. The S3 server is moto's,
on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalkit.results.query import connect
from tests.conftest import run_cli
from tests.scale.conftest import FAKE_ENV, objects, query_csv
from tests.scale.test_compact import QUERIES, _exact

pytestmark = pytest.mark.e2e

pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def local_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two quickstart runs of several judgment parts each (one sweep: one process), the second
    marked ``failed``; the runs directory and the finished run's id."""
    root = tmp_path_factory.mktemp("runs")
    run_cli("run", "-m", "+experiment=quickstart", "runner.batch_size=16",
            "runner.summary=false", "judges.prompt_echo.threshold=0.5,0.9",
            "runner.judge_repeats={prompt_echo: 2}", cwd=root)  # (repeats a compact keeps)
    manifests = {json.loads(p.read_text())["sweep_job"]: p
                 for p in (root / "runs/quickstart").glob("*/manifest.json")}
    failed = manifests[1]
    failed.write_text(json.dumps({**json.loads(failed.read_text()), "status": "failed"}))
    return root / "runs", manifests[0].parent.name


def _repeats(runs_dir: Path, run_id: str) -> list[str]:
    """The run's repeat files (``runner.repeats``), which a compact keeps as they are."""
    found = sorted((runs_dir / "quickstart" / run_id / "judgments").glob("repeat-*.parquet"))
    assert found
    return [f"judgments/{p.name}" for p in found]


def _answers(runs_dir: str) -> list[list[tuple]]:
    con = connect(runs_dir, include_unfinished=True)
    return [[tuple(_exact(v) for v in row) for row in con.execute(q).fetchall()]
            for q in QUERIES]


def _compact(url: str, capsys: pytest.CaptureFixture[str], *refs: str) -> str:
    """``evalkit compact --runs-dir URL [RUN...]`` in this process; what it printed."""
    from evalkit.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["compact", "--runs-dir", url, *refs])
    out = capsys.readouterr()
    assert done.value.code == 0, out.err
    return out.out



def _fault(monkeypatch: pytest.MonkeyPatch, spec: str | None) -> None:
    from evalkit import _faults

    if spec is None:
        monkeypatch.delenv("EVALKIT_FAULT", raising=False)
    else:
        monkeypatch.setenv("EVALKIT_FAULT", spec)
    monkeypatch.setattr(_faults, "_parsed", False)
    _faults._seen.clear()


def _layout(fs, name: str) -> dict[str, list[str]]:
    """Each run's objects (relative to it), as in the bucket."""
    runs: dict[str, list[str]] = {}
    for key in sorted(objects(fs, name)):
        parts = key.split("/")
        runs.setdefault(parts[2], []).append("/".join(parts[3:]))
    return runs


def _local_layout(runs_dir: Path) -> dict[str, list[str]]:
    return {d.name: sorted(p.relative_to(d).as_posix() for p in d.rglob("*")
                           if p.is_file() and p.name != ".lock")
            for d in sorted((runs_dir / "quickstart").iterdir())}


def test_compact_in_a_bucket_equals_compact_on_disk(tmp_path: Path, local_runs, bucket,
                                                    capsys, monkeypatch) -> None:
    import pyarrow.fs as pafs

    from evalkit.commands import _compact_remote, compact

    url, fs, name = bucket
    local_runs, done = local_runs
    going = next(d.name for d in (local_runs / "quickstart").iterdir() if d.name != done)
    pafs.copy_files(str(local_runs), f"{name}/runs", destination_filesystem=fs)
    # what failed uploads left: staging objects no reader lists, and a merged file a
    # compaction uploaded but never committed
    leftovers = [f"{name}/runs/quickstart/{done}/judgments/.part-00003.parquet.tmp-0123abcd",
                 f"{name}/runs/quickstart/{going}/.manifest.json.tmp-4567cdef",
                 f"{name}/runs/quickstart/{done}/.judgments-new/part-00000.parquet"]
    for path in leftovers:
        with fs.open_output_stream(path) as f:
            f.write(b"PAR1 half a file")
    before = _answers(url)
    assert before == _answers(str(local_runs))

    monkeypatch.setattr(_compact_remote, "STAGING_GRACE_S", 0.0)
    parts = len(list((local_runs / "quickstart" / done / "judgments").glob("part-*.parquet")))
    assert parts > 1
    repeats = connect(url).execute("SELECT count(*) FROM repeats").fetchone()[0]
    assert repeats > 0
    out = _compact(url, capsys)
    assert f"compacted 1 of 2 runs: {parts} judgment parts into 1 files" in out
    assert _answers(url) == before
    assert connect(url).execute("SELECT count(*) FROM repeats").fetchone()[0] == repeats

    on_disk = tmp_path / "runs"
    shutil.copytree(local_runs, on_disk)
    assert compact.compact_run(on_disk / "quickstart" / done) == parts
    assert _layout(fs, name) == _local_layout(on_disk)
    assert _answers(str(on_disk)) == before
    assert "compacted 0 of 2 runs" in _compact(url, capsys)  # nothing more to do


@pytest.mark.parametrize("step", ["compact_written", "compact_committed", "compact_copied",
                                  "compact_swapped"])
def test_a_compact_stopped_at_any_step_leaves_the_bucket_readable(
        local_runs, bucket, capsys, monkeypatch, step: str) -> None:
    import pyarrow.fs as pafs

    from evalkit.cli import main

    url, fs, name = bucket
    local_runs, done = local_runs

    pafs.copy_files(str(local_runs), f"{name}/runs", destination_filesystem=fs)
    before = _answers(url)
    _fault(monkeypatch, f"fail@{step}")  # (nothing is cleaned up on the way out: a kill)
    with pytest.raises(RuntimeError, match="injected"):
        main(["compact", "--runs-dir", url, done])
    assert _answers(url) == before
    if step != "compact_written":  # committed: the merged file stands in for judgments/
        assert any("/.judgments-new/" in k for k in objects(fs, name))
    _fault(monkeypatch, None)
    _compact(url, capsys)
    assert _answers(url) == before
    layout = _layout(fs, name)
    assert [f for f in layout[done] if f.startswith("judgments/")] == \
        ["judgments/part-00000.parquet", *_repeats(local_runs, done)]
    assert not [f for files in layout.values() for f in files if f.startswith(".")]


def test_a_compact_killed_after_its_commit_is_finished_by_the_next(tmp_path: Path,
                                                                   local_runs, bucket,
                                                                   capsys) -> None:
    """A real SIGKILL, in a process of its own, once the merged file is copied beside the
    old parts (a reader of judgments/ would count every row twice)."""
    import pyarrow.fs as pafs

    url, fs, name = bucket
    local_runs, done = local_runs
    pafs.copy_files(str(local_runs), f"{name}/runs", destination_filesystem=fs)
    before = _answers(url)
    proc = run_cli("compact", "--runs-dir", url, cwd=tmp_path, check=False,
                   env={**FAKE_ENV, "EVALKIT_FAULT": "kill@compact_copied"})
    assert proc.returncode == -9
    assert f"runs/quickstart/{done}/.judgments-swap" in objects(fs, name)
    sql = f"SELECT count(*) FROM judgments WHERE run_id = '{done}'"
    assert query_csv(url, sql, capsys) == ["count_star()", "320"]  # (not twice over)
    assert _answers(url) == before
    assert "compacted 0 of 2 runs" in _compact(url, capsys)  # (finished, not counted again)
    assert _answers(url) == before
    assert [k for k in objects(fs, name) if f"/{done}/" in k and "judgments" in k] == \
        [f"runs/quickstart/{done}/{f}" for f in ["judgments/part-00000.parquet",
                                                 *_repeats(local_runs, done)]]
