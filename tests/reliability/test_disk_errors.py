"""A disk error anywhere is one line naming the path, exit 2, and nothing half-written: a
full disk (``ENOSPC``, raised where the data is written or renamed into place), a read-only
file system (``EROFS`` from ``mkdir``) and paths that cannot be made at all (a directory
under a file, a directory where a file goes), for ``report``, ``report --index``,
``compact``, ``merge``, ``query --out`` and ``run``. In-process where a fault is injected;
the path-under-a-file cases are real and work as root too."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit import cli

EVALKIT = str(Path(sys.executable).with_name("evalkit"))


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    return int(done.value.code or 0), capsys.readouterr().err


def _one_line(code: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-3000:])
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert lines[0].startswith("evalkit: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def _no_temporaries(root: Path) -> None:
    left = [p for p in root.rglob("*") if ".tmp-" in p.name or p.name.startswith(
        (".merge-", ".judgments-new-"))]
    assert not left, left


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rename into place fails as a full disk does (no file name in the error)."""
    def replace(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", replace)


def _read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every new directory fails as on a read-only file system."""
    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", mkdir)


def _runs(shard_runs: Path) -> list[Path]:
    return sorted(p for p in (shard_runs / "quickstart").iterdir())


def test_report_on_a_full_disk(shard_runs: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    run = _runs(shard_runs)[0]
    _full_disk(monkeypatch)
    code, err = _cli(["report", str(run), "--n-boot", "0"], capsys)
    _one_line(code, err, str(run / "report.html"), "No space left on device")
    _no_temporaries(shard_runs)


def test_report_into_a_directory_under_a_file(shard_runs: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    run = _runs(shard_runs)[0]
    (shard_runs / "afile").write_text("x")
    code, err = _cli(["report", str(run), "--out", str(shard_runs / "afile" / "sub")], capsys)
    _one_line(code, err, str(shard_runs / "afile"), "Not a directory")


def test_report_index_on_a_full_disk_and_over_a_directory(
        shard_runs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (shard_runs / "index.html").mkdir()
    code, err = _cli(["report", "--index", str(shard_runs)], capsys)
    _one_line(code, err, str(shard_runs / "index.html"))
    (shard_runs / "index.html").rmdir()
    _full_disk(monkeypatch)
    code, err = _cli(["report", "--index", str(shard_runs)], capsys)
    _one_line(code, err, str(shard_runs / "index.html"), "No space left on device")
    _no_temporaries(shard_runs)


def test_compact_on_a_read_only_file_system(shard_runs: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: sorted(q.name for q in (p / "judgments").iterdir()) for p in _runs(shard_runs)}
    _read_only(monkeypatch)
    code, err = _cli(["compact", "--runs-dir", str(shard_runs)], capsys)
    _one_line(code, err, str(_runs(shard_runs)[0]), "Read-only file system")
    assert before == {p: sorted(q.name for q in (p / "judgments").iterdir())
                      for p in _runs(shard_runs)}
    _no_temporaries(shard_runs)


def test_merge_on_a_full_disk(shard_runs: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    runs = _runs(shard_runs)
    _full_disk(monkeypatch)
    code, err = _cli(["merge", "--runs-dir", str(shard_runs), *(r.name for r in runs)], capsys)
    _one_line(code, err, str(shard_runs / "quickstart"), "No space left on device")
    assert _runs(shard_runs) == runs
    _no_temporaries(shard_runs)


def test_query_out_on_a_full_disk_and_under_a_file(
        shard_runs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (shard_runs.parent / "afile").write_text("x")
    for out in ("x.csv", "x.parquet", "x.json"):
        target = shard_runs.parent / "afile" / out
        code, err = _cli(["query", "SELECT * FROM runs", "--runs-dir", str(shard_runs),
                          "--out", str(target)], capsys)
        _one_line(code, err, str(target), "Not a directory")
    _full_disk(monkeypatch)
    for out in ("x.csv", "x.parquet"):
        target = shard_runs.parent / out
        code, err = _cli(["query", "SELECT * FROM runs", "--runs-dir", str(shard_runs),
                          "--out", str(target)], capsys)
        _one_line(code, err, str(target), "No space left on device")
        assert not target.exists()
    _no_temporaries(shard_runs.parent)


@pytest.mark.e2e
def test_run_with_its_runs_directory_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    env = {**os.environ, "EVALKIT_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([EVALKIT, "run", "+experiment=quickstart", "runner.summary=false",
                           f"runner.runs_dir={tmp_path / 'afile' / 'runs'}"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    _one_line(proc.returncode, proc.stderr, str(tmp_path / "afile"), "Not a directory")


def test_a_file_duckdb_or_arrow_cannot_read_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import duckdb
    import pyarrow as pa

    from evalkit.commands import compact

    for exc in (duckdb.IOException("IO Error: File 'runs/x/metrics.parquet' too small to be "
                                   "a Parquet file\nLINE 1: SELECT ..."),
                pa.ArrowInvalid("Parquet magic bytes not found in footer of runs/x/a\nmore")):
        def fail(args: object, exc: Exception = exc) -> int:
            raise exc

        monkeypatch.setattr(compact, "main", fail)
        code, err = _cli(["compact", "x"], capsys)
        _one_line(code, err, "compact: ", str(exc).splitlines()[0])
    def bug(args: object) -> int:
        raise KeyError("a bug stays a traceback")

    monkeypatch.setattr(compact, "main", bug)
    with pytest.raises(KeyError):
        cli.main(["compact", "x"])
