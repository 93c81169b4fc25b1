"""An upload to a bucket that fails mid-file leaves nothing under its final name: every
object is written under a hidden staging name and moved into place only once it is whole
(pyarrow's S3 stream has no abort: closing it after a failure would publish the bytes sent
so far). Failures are injected for real: a source that raises mid-write, and a proxy in
front of the S3 test server that drops the connection mid-upload."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.scale.conftest import FAKE_ENV, objects, query_csv
from tests.scale.s3_proxy import CuttingProxy

pytestmark = pytest.mark.e2e

pytest.importorskip("moto.server")


class _BreaksAfter(io.RawIOBase):
    """A source that gives ``size`` bytes, then fails as a disk or a Ctrl-C would."""

    def __init__(self, size: int, error: BaseException) -> None:
        self.left, self.error = size, error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self.left <= 0:
            raise self.error
        n = min(len(buffer), self.left, 1 << 16)
        buffer[:n] = b"x" * n
        self.left -= n
        return n


@pytest.mark.parametrize("error", [OSError("input/output error"), KeyboardInterrupt()])
def test_a_write_that_fails_mid_file_leaves_no_object(bucket, error: BaseException) -> None:
    from evalkit.errors import RunDirError
    from evalkit.results.storage import open_runs_dir

    url, fs, name = bucket
    remote = open_runs_dir(url, "runner.runs_dir")
    target = remote.path("quickstart", "x", "judgments", "part-00000.parquet")
    src = io.BufferedReader(_BreaksAfter(300_000, error))
    with pytest.raises(RunDirError if isinstance(error, OSError) else KeyboardInterrupt) as got:
        remote.write(src, target)
    if isinstance(error, OSError):
        line = str(got.value)
        assert "\n" not in line and "input/output error" in line
        assert line.startswith("runner.runs_dir: cannot upload part-00000.parquet to s3://")
    assert objects(fs, name) == {}  # not under its name, nor a staging one left behind
    assert not remote.exists(remote.path("quickstart", "x"))  # (a new run may take its id)
    remote.write(io.BytesIO(b"whole"), target)
    assert objects(fs, name) == {"runs/quickstart/x/judgments/part-00000.parquet": 5}


def test_an_object_too_large_to_copy_is_written_in_place_and_removed_on_failure(
        tmp_path: Path, bucket, s3_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 copies at most 5 GiB in one request, so a larger object is not staged and moved:
    it is written under its own name (seen by the proxy), and deleted when its write fails
    (here the limit is made 1 kB)."""
    from evalkit.errors import RunDirError
    from evalkit.results import storage

    url, fs, name = bucket
    monkeypatch.setattr(storage, "_COPY_MAX", 1000)
    local = tmp_path / "records.parquet"
    local.write_bytes(b"x" * 5000)
    with CuttingProxy(s3_server, cut=r"^$", after=0) as proxy:
        remote = storage.open_runs_dir(url.replace(str(s3_server), str(proxy.port)),
                                       "runner.runs_dir")
        target = remote.path("quickstart", "x", "records.parquet")
        with pytest.raises(RunDirError, match="input/output error"):
            remote.write(io.BufferedReader(_BreaksAfter(300_000, OSError("input/output "
                                                                         "error"))),
                         target, size=400_000)
        assert objects(fs, name) == {}
        remote.upload(local, target)
    assert objects(fs, name) == {"runs/quickstart/x/records.parquet": 5000}
    written = {p.split("?")[0] for m, p in proxy.requests if m in ("PUT", "POST")
               and not p.endswith("/")}  # (not pyarrow's directory markers)
    assert written == {f"/{name}/runs/quickstart/x/records.parquet"}, written


def test_an_upload_cut_mid_file_fails_the_run_and_a_resume_finishes_it(
        tmp_path: Path, bucket, s3_server: int, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: the proxy drops the connection after 2 kB of the second judgment part's
    upload (its retry too, then refuses it). The run fails in one line; no object of that
    part is in the bucket under any name; the run's failed manifest is up (its tables are
    never read), and a query answers; a resume through the server itself finishes the
    run."""
    url, fs, name = bucket
    env = {**FAKE_ENV}
    args = ["run", "+experiment=quickstart", "runner.batch_size=40", "runner.summary=false"]
    with CuttingProxy(s3_server, cut=r"part-00001\.parquet", after=2048) as proxy:
        via_proxy = url.replace(f"127.0.0.1:{s3_server}", f"127.0.0.1:{proxy.port}")
        proc = run_cli(*args, f"runner.runs_dir='{via_proxy}'", "runner.run_id=cut",
                       cwd=tmp_path, env=env, check=False)
    assert proxy.cuts >= 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "runner.runs_dir: cannot upload part-00001.parquet" in lines[0]
    left = objects(fs, name)
    assert not [k for k in left if "part-00001" in k], left
    assert not [k for k in left if ".tmp-" in k], left
    manifest = json.loads(fs.open_input_file(f"{name}/runs/quickstart/cut/manifest.json").read())
    assert manifest["status"] == "failed" and "cannot upload part-00001" in manifest["error"]
    sql = ("SELECT run_id, status, (SELECT count(*) FROM judgments) AS judgments FROM runs")
    assert query_csv(url, sql, capsys) == ["run_id,status,judgments", "cut,failed,0"]

    run_cli(*args, f"runner.runs_dir='{url}'", "--resume", "cut", cwd=tmp_path, env=env)
    assert query_csv(url, sql, capsys) == ["run_id,status,judgments", "cut,ok,320"]
    assert not [k for k in objects(fs, name) if "/." in k]  # no hidden object left

