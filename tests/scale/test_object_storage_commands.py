"""``compare``, ``report``, ``push`` and ``merge`` on runs in a bucket (``--runs-dir
s3://...``) answer as they do on the same runs on local disk: the runs they name are copied
to a private directory, a report is uploaded beside its run, a merged run is uploaded whole
with its manifest last. The S3 server is moto's, on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.scale.conftest import FAKE_ENV
from tests.scale.conftest import objects as _objects
from tests.sinks.otlp_receiver import otlp_receiver

pytestmark = pytest.mark.e2e

pytest.importorskip("moto.server")


def _env() -> dict[str, str]:
    return dict(FAKE_ENV)


@pytest.fixture
def runs_in_bucket(tmp_path: Path, bucket) -> tuple[str, object, str]:
    """Two quickstart runs (``one``, ``two``) and two shards of a third (``s0``, ``s1``),
    made on local disk and copied to the bucket."""
    import pyarrow.fs as pafs

    url, fs, name = bucket
    for run_id, extra in (("one", []), ("two", ["judges.prompt_echo.threshold=0.9"]),
                          ("s0", ["source.shard=0/2"]), ("s1", ["source.shard=1/2"])):
        run_cli("run", "+experiment=quickstart", "runner.summary=false",
                f"runner.run_id={run_id}", *extra, cwd=tmp_path)
    pafs.copy_files(str(tmp_path / "runs"), f"{name}/runs", destination_filesystem=fs)
    return url, fs, name


def test_compare_and_push_read_runs_in_a_bucket_as_on_disk(tmp_path: Path,
                                                            runs_in_bucket) -> None:
    url, _, name = runs_in_bucket
    args = ("compare", "one", "two", "--n-boot", "50", "--format", "json")
    local = run_cli(*args, cwd=tmp_path)
    remote = run_cli(*args, "--runs-dir", url, cwd=tmp_path, env=_env())
    assert json.loads(remote.stdout) == json.loads(local.stdout) and json.loads(local.stdout)
    with otlp_receiver() as got:
        pushed = run_cli("push", "two", "--to", "otlp", "--endpoint", got.url,
                         "--runs-dir", url, cwd=tmp_path, env=_env())
        remote_records = len(got.log_records())
    with otlp_receiver() as got:
        run_cli("push", "two", "--to", "otlp", "--endpoint", got.url, "--json", cwd=tmp_path)
        local_records = len(got.log_records())
    assert remote_records == local_records > 0, pushed.stdout
    # (it says where the run is: the bucket, not the private copy it was read from)
    assert f"from s3://{name}/runs/quickstart/two to " in pushed.stdout, pushed.stdout


def test_report_of_a_run_in_a_bucket_is_uploaded_beside_it(tmp_path: Path,
                                                           runs_in_bucket) -> None:
    url, fs, name = runs_in_bucket
    before = _objects(fs, name)
    proc = run_cli("report", "two", "--n-boot", "0", "--runs-dir", url, cwd=tmp_path,
                   env=_env())
    assert "s3://" in proc.stdout and "report.html" in proc.stdout, proc.stdout
    added = {k: v for k, v in _objects(fs, name).items() if k not in before}
    assert sorted(added) == sorted(f"runs/quickstart/two/report.{ext}"
                                   for ext in ("html", "md", "junit.xml")), added
    assert all(size > 0 for size in added.values())
    assert not list(tmp_path.glob("runs/quickstart/two/report.*"))  # nothing written locally


def test_merge_of_shards_in_a_bucket_uploads_the_merged_run(tmp_path: Path,
                                                            runs_in_bucket) -> None:
    url, fs, name = runs_in_bucket
    proc = run_cli("merge", "s0", "s1", "--runs-dir", url, cwd=tmp_path, env=_env())
    assert "s3://" in proc.stdout, proc.stdout
    sql = ("SELECT count(*) AS n, count(DISTINCT record_id) AS ids FROM records "
           "WHERE run_id NOT IN ('one', 'two', 's0', 's1')")
    merged = json.loads(run_cli("query", "--runs-dir", url, sql, "--format", "json",
                                cwd=tmp_path, env=_env()).stdout)
    assert merged == [{"n": 160, "ids": 160}]
    # the merged metrics equal the unsharded run's (run "one": the same config)
    sql = ("SELECT metric, slice, round(value, 12) AS v FROM metrics WHERE run_id = '{}' "
           "ORDER BY ALL")
    new_id = json.loads(run_cli(
        "query", "--runs-dir", url, "SELECT run_id FROM runs WHERE run_id NOT IN "
        "('one', 'two', 's0', 's1')", "--format", "json", cwd=tmp_path, env=_env()).stdout
    )[0]["run_id"]
    got = run_cli("query", "--runs-dir", url, sql.format(new_id), "--format", "json",
                  cwd=tmp_path, env=_env()).stdout
    want = run_cli("query", "--runs-dir", url, sql.format("one"), "--format", "json",
                   cwd=tmp_path, env=_env()).stdout
    assert json.loads(got) == json.loads(want)
    assert not (tmp_path / "runs" / "quickstart" / new_id).exists()  # only in the bucket
