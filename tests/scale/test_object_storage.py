"""Runs on object storage: ``runner.runs_dir`` and ``--runs-dir`` may be an ``s3://`` URL.
A run is written there whole (the manifest with its final status last), ``evalkit query``
reads it there with the same views and results as on local disk, a killed or failed run is
never read as data, bad URLs are one-line errors, and credentials in the URL are stored
nowhere. The S3 server is moto's, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EVALKIT, run_cli
from tests.scale.conftest import FAKE_ENV
from tests.scale.conftest import objects as _objects

pytestmark = pytest.mark.e2e  # runs evalkit end to end

pytest.importorskip("moto.server")

KEY_ID, SECRET = "AKIAEVALKITTESTKEY", "evalkitTestSecretValue42xyz"
VIEWS = {
    "records": "SELECT * FROM records ORDER BY run_id, record_id",
    "judgments": "SELECT * EXCLUDE (latency_s) FROM judgments ORDER BY run_id, record_id, judge",
    "metrics": "SELECT * FROM metrics ORDER BY run_id, metric, slice",
    "alerts": "SELECT * FROM alerts ORDER BY ALL",
    "rejects": "SELECT * FROM rejects ORDER BY ALL",
    "runs": "SELECT * EXCLUDE (run_dir, config, started_at, finished_at, duration_s) FROM runs "
            "ORDER BY run_id",
    "latest": "SELECT run_id, status, n_records FROM latest",
}


def _rows(con, sql: str) -> list[tuple]:
    return [tuple(round(v, 9) if isinstance(v, float) else v for v in row)
            for row in con.sql(sql).fetchall()]


def _env(**extra: str) -> dict[str, str]:
    return {**FAKE_ENV, **extra}


def test_query_reads_runs_on_s3_as_on_local_disk(tmp_path: Path, bucket) -> None:
    """The same run directories, on disk and uploaded to the bucket: every view answers the
    same; a failed run is listed and read only when asked for."""
    import pyarrow.fs as pafs

    import evalkit

    url, fs, name = bucket
    run_cli("run", "+experiment=quickstart", "runner.batch_size=40", "runner.summary=false",
            "runner.run_id=one", cwd=tmp_path)
    run_cli("run", "+experiment=quickstart", "runner.summary=false", "runner.run_id=two",
            "judges.prompt_echo.threshold=0.9", cwd=tmp_path, env={"EVALKIT_FAULT":
                                                                   "fail@metrics_written"},
            check=False)
    local = tmp_path / "runs"
    assert json.loads((local / "quickstart/two/manifest.json").read_text())["status"] == "failed"
    # a part of an older run, without a column today's runs have: read as null
    import pyarrow.parquet as pq

    old_part = local / "quickstart/two/judgments/part-00000.parquet"
    pq.write_table(pq.read_table(old_part).drop_columns(["details", "error_cause"]), old_part)
    pafs.copy_files(str(local), f"{name}/runs", destination_filesystem=fs)

    for unfinished in (False, True):
        on_disk = evalkit.connect(str(local), include_unfinished=unfinished)
        remote = evalkit.connect(url, include_unfinished=unfinished)
        for view, sql in [*VIEWS.items(),
                          ("runs", "SELECT * EXCLUDE (run_dir) FROM runs ORDER BY run_id")]:
            assert _rows(remote, sql) == _rows(on_disk, sql), view
        assert remote.sql("SELECT count(*) FROM records").fetchone()[0] == \
            (320 if unfinished else 160)
    statuses = evalkit.connect(url).sql("SELECT run_id, status, run_dir FROM runs "
                                        "ORDER BY run_id").fetchall()
    assert [s[:2] for s in statuses] == [("one", "ok"), ("two", "failed")]
    one = evalkit.connect(url, run="one").sql("SELECT DISTINCT run_id FROM records").fetchall()
    assert one == [("one",)]

    sql = "SELECT model, count(*) AS n FROM records GROUP BY model ORDER BY model"
    local_out = run_cli("query", sql, "--format", "json", cwd=tmp_path).stdout
    remote_out = run_cli("query", "--runs-dir", url, sql, "--format", "json", cwd=tmp_path,
                         env=_env()).stdout
    assert remote_out == local_out and json.loads(local_out)
    sql = "SELECT run_id, count(*) AS n FROM judgments GROUP BY run_id"
    latest = run_cli("query", "--runs-dir", url, "--run", "latest", sql, "--format", "csv",
                     cwd=tmp_path, env=_env()).stdout
    assert latest.split() == ["run_id,n", "one,320"]
    assert latest == run_cli("query", "--run", "latest", sql, "--format", "csv",
                             cwd=tmp_path).stdout


def test_queries_over_s3_cannot_write_or_read_elsewhere(tmp_path: Path, bucket) -> None:
    import pyarrow.fs as pafs

    from evalkit.errors import QueryError
    from evalkit.results.query import connect, run_query

    url, fs, name = bucket
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=tmp_path)
    pafs.copy_files(str(tmp_path / "runs"), f"{name}/runs", destination_filesystem=fs)
    (tmp_path / "secret.csv").write_text("a\n1\n")
    before = _objects(fs, name)
    con = connect(url)
    target = f"s3://{name}/runs/x.parquet"
    for sql in [f"COPY (SELECT 1) TO '{target}'", f"SELECT * FROM read_parquet('{target}')",
                f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')",
                "SELECT * FROM read_csv('/etc/passwd')", "ATTACH 'x.db' AS x",
                "SELECT * FROM query('SELECT 1')", "INSTALL httpfs", "LOAD httpfs",
                "SET enable_external_access = true", "SELECT * FROM arrow_scan(1, 2, 3)"]:
        with pytest.raises(QueryError):
            run_query(con, sql)
    assert run_query(con, "SELECT count(*) FROM records")[1] == [(160,)]
    assert _objects(fs, name) == before
    assert not (tmp_path / "x.db").exists()


def test_run_writes_whole_run_to_s3_and_reads_like_local(tmp_path: Path, bucket) -> None:
    import evalkit

    url, fs, name = bucket
    run_cli("run", "+experiment=quickstart", "runner.summary=false", "runner.run_id=same",
            "runner.batch_size=40", cwd=tmp_path)
    stage = tmp_path.parent / f"{tmp_path.name}-tmp"  # where the run is staged: left empty
    stage.mkdir()
    out = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                  "runner.run_id=same", "runner.batch_size=40", cwd=tmp_path,
                  env=_env(TMPDIR=str(stage)))
    assert not list(stage.iterdir())
    files = _objects(fs, name)
    expected = {"manifest.json", "records.parquet", "metrics.parquet", "alerts.parquet",
                "rejects.parquet"}
    run_files = {k.removeprefix("runs/quickstart/same/") for k in files}
    assert expected <= run_files
    assert {f for f in run_files if f.startswith("judgments/")} == \
        {p.relative_to(tmp_path / "runs/quickstart/same").as_posix()
         for p in (tmp_path / "runs/quickstart/same/judgments").glob("*.parquet")}
    assert not [f for f in run_files if f.startswith(".") or ".tmp" in f]
    assert not [p for p in tmp_path.iterdir() if p.name not in ("runs", ".hydra", "outputs")]
    assert f"s3://{name}/runs/quickstart/same" in out.stdout
    manifest = json.loads(fs.open_input_file(f"{name}/runs/quickstart/same/manifest.json")
                          .read())
    assert manifest["status"] == "ok"
    assert manifest["run_dir"] == f"s3://{name}/runs/quickstart/same"

    on_disk, remote = evalkit.connect(str(tmp_path / "runs")), evalkit.connect(url)
    for view, sql in VIEWS.items():
        if view != "runs":
            assert _rows(remote, sql) == _rows(on_disk, sql), view
    # a run id that exists in the bucket is refused, as on disk
    again = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                    "runner.run_id=same", cwd=tmp_path, env=_env(), check=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    bad = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                  f"source.path={tmp_path / 'missing.jsonl'}", cwd=tmp_path,
                  env=_env(TMPDIR=str(stage)), check=False)
    assert bad.returncode == 2 and "missing.jsonl" in bad.stderr
    assert not list(stage.iterdir()) and _objects(fs, name) == files


@pytest.mark.parametrize(("fault", "status"), [("kill@judgment_part#2", "running"),
                                               ("fail@metrics_written", "failed"),
                                               ("kill@run_finishing", "running")])
def test_killed_or_failed_run_on_s3_is_never_read_as_ok(tmp_path: Path, bucket, fault: str,
                                                         status: str) -> None:
    url, fs, name = bucket
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                   "runner.run_id=hurt", "runner.batch_size=40", "runner.summary=false",
                   cwd=tmp_path, env=_env(EVALKIT_FAULT=fault), check=False)
    assert proc.returncode != 0
    manifest = json.loads(fs.open_input_file(f"{name}/runs/quickstart/hurt/manifest.json")
                          .read())
    assert manifest["status"] == status
    shown = "interrupted" if status == "running" else status  # the writer is gone
    sql = ("SELECT run_id, status, (SELECT count(*) FROM records) AS records, (SELECT count(*) "
           "FROM judgments) AS judgments, (SELECT count(*) FROM metrics) AS metrics, (SELECT "
           "count(*) FROM latest) AS latest FROM runs")
    out = run_cli("query", "--runs-dir", url, sql, "--format", "csv", cwd=tmp_path,
                  env=_env()).stdout
    assert out.split() == ["run_id,status,records,judgments,metrics,latest",
                           f"hurt,{shown},0,0,0,0"]

    # finished with --resume: the batches .progress lists kept, the stopped run's other
    # objects replaced, one written by nobody since (a stray part) removed
    stray = f"{name}/runs/quickstart/hurt/judgments/part-00099.parquet"
    with fs.open_output_stream(stray) as f:
        f.write(b"not parquet")
    run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", "--resume", "hurt",
            "runner.batch_size=40", "runner.summary=false", cwd=tmp_path, env=_env())
    out = run_cli("query", "--runs-dir", url, sql, "--format", "csv", cwd=tmp_path,
                  env=_env()).stdout
    assert out.split()[1].startswith("hurt,ok,160,320,")
    assert "runs/quickstart/hurt/judgments/part-00099.parquet" not in _objects(fs, name)
    again = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", "--resume",
                    "hurt", cwd=tmp_path, env=_env(), check=False)
    assert again.returncode == 2 and "nothing to resume" in again.stderr


def test_resume_of_a_remote_run_another_machine_may_still_write_is_refused(
        tmp_path: Path, bucket) -> None:
    url, fs, name = bucket
    manifest = {"run_id": "busy", "experiment": "quickstart", "status": "running",
                "writer": {"host": "another-machine", "pid": 1}}
    with fs.open_output_stream(f"{name}/runs/quickstart/busy/manifest.json") as f:
        f.write(json.dumps(manifest).encode())
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", "--resume",
                   "busy", cwd=tmp_path, env=_env(), check=False)
    assert "may still be running" in _one_line_error(proc, "runner.resume")
    out = run_cli("query", "--runs-dir", url, "SELECT status FROM runs", "--format", "csv",
                  cwd=tmp_path, env=_env()).stdout
    assert out.split() == ["status", "running"]  # (another machine's process: not judged)


def _status_elsewhere(url: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """``(run_id, status)`` of every run, as a reader on another machine sees them."""
    import socket

    import evalkit

    with monkeypatch.context() as m:
        m.setattr(socket, "gethostname", lambda: "a-reader-elsewhere")
        return evalkit.connect(url, include_unfinished=True).sql(
            "SELECT run_id, status FROM runs ORDER BY run_id").fetchall()


def test_a_killed_remote_run_reads_interrupted_on_any_machine(
        tmp_path: Path, bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's heartbeat in the bucket: a run killed (SIGKILL) stops beating, and once
    its last beat is a few intervals old a reader on another machine (where its pid means
    nothing) shows it interrupted, and a resume from there may finish it."""
    import time

    from evalkit.results.storage import STALE_BEATS, heartbeat_stale

    url, fs, name = bucket
    beat = 0.2
    manifest_path = f"{name}/runs/quickstart/gone/manifest.json"
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                   "runner.run_id=gone", "runner.batch_size=40", "runner.summary=false",
                   cwd=tmp_path, env=_env(EVALKIT_FAULT="kill@judgment_part#2",
                                          EVALKIT_HEARTBEAT_S=str(beat)), check=False)
    assert proc.returncode == -9
    manifest = json.loads(fs.open_input_file(manifest_path).read())
    assert manifest["status"] == "running" and manifest["writer"]["heartbeat_s"] == beat
    # the rule: a beat a little late is live, one older than STALE_BEATS intervals is not
    from datetime import datetime

    last = datetime.fromisoformat(manifest["heartbeat_at"]).timestamp()
    assert not heartbeat_stale(manifest, now=last + beat * (STALE_BEATS - 0.5))
    assert heartbeat_stale(manifest, now=last + beat * (STALE_BEATS + 0.5))
    # the writer's host is made another machine's: only the heartbeat can tell it stopped
    manifest["writer"]["host"] = "the-writer-elsewhere"
    with fs.open_output_stream(manifest_path) as f:
        f.write(json.dumps(manifest).encode())
    time.sleep(max(0.0, last + beat * (STALE_BEATS + 1) - time.time()))
    assert _status_elsewhere(url, monkeypatch) == [("gone", "interrupted")]
    run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", "--resume", "gone",
            "runner.batch_size=40", "runner.summary=false", cwd=tmp_path,
            env=_env(EVALKIT_HEARTBEAT_S=str(beat)))
    finished = json.loads(fs.open_input_file(manifest_path).read())
    assert finished["status"] == "ok" and finished["resumed"][0]["from"] == "running"
    time.sleep(beat * (STALE_BEATS + 1))  # no beat of the resumed run lands after its end
    assert json.loads(fs.open_input_file(manifest_path).read()) == finished
    assert _status_elsewhere(url, monkeypatch) == [("gone", "ok")]


def test_a_live_remote_run_keeps_beating_and_is_not_resumed(
        tmp_path: Path, bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that goes on longer than the staleness bound stays ``running`` to readers
    elsewhere and cannot be resumed from there; when it ends, its final manifest stays."""
    import time
    from datetime import datetime, timezone

    from evalkit.results.storage import STALE_BEATS, open_runs_dir
    from evalkit.runner.lifecycle import Staged

    url, fs, name = bucket
    beat = 1.0  # (a staged beat is 7 requests to a server in this process: at 0.25 s a CI
    # run under load saw one beat late by over 3 of them, so the live run read interrupted)
    remote = open_runs_dir(url, "runner.runs_dir")
    run_dir = tmp_path / "stage/quickstart/live"
    run_dir.mkdir(parents=True)
    manifest = {"run_id": "live", "experiment": "quickstart", "status": "running",
                "writer": {"host": "the-writer-elsewhere", "pid": 1, "heartbeat_s": beat},
                "heartbeat_at": datetime.now(timezone.utc).isoformat()}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    staged = Staged(remote, tmp_path / "stage", remote.path("quickstart", "live"), beat_s=beat)
    staged.publish(run_dir, manifest_only=True)
    staged.start_heartbeat(manifest)
    try:
        time.sleep(beat * STALE_BEATS * 2)
        assert _status_elsewhere(url, monkeypatch) == [("live", "running")]
        proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                       "--resume", "live", cwd=tmp_path, env=_env(), check=False)
        assert "may still be running" in _one_line_error(proc, "runner.resume")
        assert _status_elsewhere(url, monkeypatch) == [("live", "running")]
        # its end: every beat stops before the final manifest goes up, none lands after it
        (run_dir / "manifest.json").write_text(json.dumps({**manifest, "status": "failed"}))
        staged.publish(run_dir)
    finally:
        staged.stop_heartbeat()
    time.sleep(beat * 3)
    shown = json.loads(fs.open_input_file(f"{name}/runs/quickstart/live/manifest.json").read())
    assert shown["status"] == "failed"
    assert _status_elsewhere(url, monkeypatch) == [("live", "failed")]


def test_a_bad_heartbeat_interval_is_one_line(tmp_path: Path, bucket,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.errors import ConfigError
    from evalkit.runner.heartbeat import heartbeat_interval

    url, fs, name = bucket
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("EVALKIT_HEARTBEAT_S", bad)
        with pytest.raises(ConfigError, match=f"EVALKIT_HEARTBEAT_S: '{bad}'"):
            heartbeat_interval()
    monkeypatch.setenv("EVALKIT_HEARTBEAT_S", " 2.5 ")
    assert heartbeat_interval() == 2.5
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'",
                   cwd=tmp_path, env=_env(EVALKIT_HEARTBEAT_S="soon"), check=False)
    assert "soon" in _one_line_error(proc, "EVALKIT_HEARTBEAT_S")
    assert not _objects(fs, name)  # refused before anything went up


_RESUMED_EXPERIMENT = """# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm]

experiment: resumed
source:
  path: ${evalkit.data:begin_wow.jsonl}
  record_id: id
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: ${oc.env:EVALKIT_JUDGE_API_BASE}
    cache: false
"""


@pytest.fixture
def fake_judge():
    """The fake OpenAI-compatible judge server of the LLM judge tests, counting calls."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "judges" / "llm"))
    try:
        from fake_llm_server import FakeLLMServer
    finally:
        sys.path.pop(0)
    server = FakeLLMServer().start()
    yield server
    server.stop()


def test_a_resumed_remote_run_judges_only_what_is_missing(tmp_path: Path, bucket,
                                                          fake_judge) -> None:
    """Each batch's judgment parts and ``.progress`` go up once the batch is judged; a
    resume after a kill downloads them and judges only the batches that were missing (the
    cache is off: every judgment is a call to the fake judge)."""
    url, fs, name = bucket
    (tmp_path / "conf/experiment").mkdir(parents=True)
    (tmp_path / "conf/experiment/resumed.yaml").write_text(_RESUMED_EXPERIMENT)
    args = ["run", "+experiment=resumed", f"runner.runs_dir='{url}'", "source.limit=60",
            "source.batch_size=20", "runner.summary=false"]
    env = _env(EVALKIT_JUDGE_API_BASE=fake_judge.url, LITELLM_LOCAL_MODEL_COST_MAP="True")
    killed = run_cli(*args, "runner.run_id=cut", cwd=tmp_path,
                     env={**env, "EVALKIT_FAULT": "kill@batch_done#2"}, check=False)
    assert killed.returncode == -9, killed.stderr
    run = f"{name}/runs/resumed/cut"
    kept = {k.removeprefix("runs/resumed/cut/") for k in _objects(fs, name)}
    assert {".progress", "judgments/part-00000.parquet", "judgments/part-00001.parquet",
            "manifest.json"} <= kept
    assert len(fs.open_input_file(f"{run}/.progress").read().splitlines()) == 2
    before = len(fake_judge.requests)
    run_cli(*args, "--resume", "cut", cwd=tmp_path, env=env)
    assert len(fake_judge.requests) - before == 20  # the third batch only
    manifest = json.loads(fs.open_input_file(f"{run}/manifest.json").read())
    assert manifest["status"] == "ok" and manifest["resumed"][0]["kept_batches"] == 2
    assert manifest["n_judgments"] == 60
    assert ".progress" not in {k.rsplit("/", 1)[-1] for k in _objects(fs, name)}
    import evalkit

    rows = evalkit.connect(url).sql("SELECT count(*), count(DISTINCT record_id) FROM "
                                    "judgments WHERE status = 'ok'").fetchall()
    assert rows == [(60, 60)]


def _one_line_error(proc: subprocess.CompletedProcess[str], key: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert key in lines[0]
    return lines[0]


def test_bad_runs_dir_urls_are_one_line_errors(tmp_path: Path, bucket, s3_server: int,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url, _, name = bucket
    endpoint = f"endpoint_override=127.0.0.1:{s3_server}&scheme=http"
    cases = {
        "malformed": f"s3://{name}/runs?{endpoint}&retries=3",
        "no bucket": f"s3:///runs?{endpoint}",
        "one slash": f"s3:/{name}/runs?{endpoint}",
        "scheme": "nosuchfs://bucket/runs",
        "missing bucket": f"s3://no-such-bucket-here/runs?{endpoint}",
        "unreachable": "s3://bucket/runs?endpoint_override=127.0.0.1:9&scheme=http",
    }
    fixes = {"malformed": "retries", "no bucket": "bucket", "one slash": "s3://BUCKET",
             "scheme": "nosuchfs",
             "missing bucket": "no-such-bucket-here", "unreachable": "127.0.0.1:9"}
    for case, bad in cases.items():
        run = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{bad}'", cwd=tmp_path,
                      env=_env(), check=False)
        line = _one_line_error(run, "runner.runs_dir")
        assert fixes[case] in line, (case, line)
        line = _one_line_error(_query_in_process(bad, capsys), "--runs-dir")
        assert fixes[case] in line, (case, line)
    assert not (tmp_path / "runs").exists()

    import moto.settings

    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # check credentials
    run = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", cwd=tmp_path,
                  env=_env(), check=False)
    assert "credentials" in _one_line_error(run, "runner.runs_dir")
    assert "credentials" in _one_line_error(_query_in_process(url, capsys), "--runs-dir")


def _query_in_process(runs_dir: str, capsys: pytest.CaptureFixture[str]
                      ) -> subprocess.CompletedProcess[str]:
    """``evalkit query --runs-dir RUNS_DIR "SELECT 1"`` in this process (the errors come
    before any query runs; a process each would cost a second each)."""
    from evalkit.cli import main

    capsys.readouterr()
    try:
        main(["query", "--runs-dir", runs_dir, "SELECT 1"])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess([], code, out.out, out.err)


def test_credentials_in_the_url_are_stored_nowhere(tmp_path: Path, bucket) -> None:
    import evalkit

    url, fs, name = bucket
    secret_url = url.replace("s3://", f"s3://{KEY_ID}:{SECRET}@")
    env = _env(AWS_ACCESS_KEY_ID="unused-here", AWS_SECRET_ACCESS_KEY="unused-here")
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{secret_url}'",
                   "runner.run_id=creds", cwd=tmp_path, env=env)
    sweep = run_cli("run", "-m", "+experiment=quickstart", f"runner.runs_dir='{secret_url}'",
                    "judges.prompt_echo.threshold=0.5,0.9", "runner.summary=false",
                    cwd=tmp_path, env=env)
    printed = proc.stdout + proc.stderr + sweep.stdout + sweep.stderr
    assert SECRET not in printed and KEY_ID not in printed
    objects = _objects(fs, name)
    assert len([k for k in objects if k.endswith("manifest.json")]) == 3
    for key in objects:
        data = fs.open_input_file(f"{name}/{key}").read()
        assert SECRET.encode() not in data and KEY_ID.encode() not in data, key
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and KEY_ID.encode() not in data, path
    # a credential in the query string (pyarrow's S3 URLs take none): refused, and masked
    in_query = f"{url}&secret_key={SECRET}"
    bad = run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{in_query}'",
                  cwd=tmp_path, env=env, check=False)
    assert bad.returncode == 2 and "secret_key" in bad.stderr
    assert SECRET not in bad.stdout + bad.stderr
    rows = evalkit.connect(secret_url).sql("SELECT run_dir, config::VARCHAR FROM runs")
    for run_dir, config in rows.fetchall():
        assert SECRET not in run_dir + config and KEY_ID not in run_dir + config
        assert run_dir.startswith(f"s3://{name}/runs/quickstart/")


def test_a_file_url_is_a_runs_dir_through_the_same_layer(tmp_path: Path) -> None:
    """pyarrow's local filesystem behind a file:// URL: the run is staged and copied there
    (its directories made, which S3 needs not), and read back through datasets."""
    url = (tmp_path / "store").as_uri()
    run_cli("run", "+experiment=quickstart", f"runner.runs_dir='{url}'", "runner.run_id=f",
            "runner.summary=false", cwd=tmp_path)
    assert json.loads((tmp_path / "store/quickstart/f/manifest.json").read_text())[
        "status"] == "ok"
    out = run_cli("query", "--runs-dir", url, "SELECT status, (SELECT count(*) FROM records) "
                  "AS n, run_dir FROM runs", "--format", "csv", cwd=tmp_path).stdout
    assert out.split() == ["status,n,run_dir", f"ok,160,{url}/quickstart/f"]


def test_an_incremental_source_needs_a_local_runs_dir(tmp_path: Path) -> None:
    """Langfuse's incremental window comes from the runs in a local runs directory: with a
    remote one it would silently read the default window, so it is refused."""
    proc = run_cli("run", "source=langfuse", "source.incremental=true",
                   f"runner.runs_dir='{(tmp_path / 'store').as_uri()}'", cwd=tmp_path,
                   env=_env(), check=False)
    assert "object storage" in _one_line_error(proc, "source.incremental")
    assert not (tmp_path / "store").exists()


def test_open_run_on_object_storage_says_how_to_read_it(bucket) -> None:
    import evalkit
    from evalkit.errors import EvalkitError

    url, _, name = bucket
    for ref, runs_dir in (("latest", url), (f"s3://{name}/runs/quickstart/x", "runs")):
        with pytest.raises(EvalkitError, match="evalkit.connect"):
            evalkit.open_run(ref, runs_dir)


def test_query_imports_the_s3_filesystem_only_for_a_remote_runs_dir(tmp_path: Path,
                                                                    bucket) -> None:
    url, _, _ = bucket
    (tmp_path / "runs").mkdir()
    code = ("import sys; from evalkit.cli import main\n"
            "try: main(sys.argv[1:])\n"
            "except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m in ('pyarrow._s3fs', 'pyarrow.fs', "
            "'pyarrow.dataset', 'moto', 'boto3', 'fsspec')))")
    for runs_dir, expected in (("runs", "[]"), (url, "['pyarrow._s3fs', 'pyarrow.fs']")):
        proc = subprocess.run([sys.executable, "-c", code, "query", "--runs-dir", runs_dir,
                               "SELECT count(*) FROM runs"], cwd=tmp_path, env={**os.environ,
                              **FAKE_ENV}, capture_output=True, text=True, timeout=120)
        assert proc.stdout.strip().splitlines()[-1] == expected, proc.stderr
    assert EVALKIT


def test_a_failed_download_is_one_line_naming_the_setting(tmp_path: Path, bucket) -> None:
    from evalkit.errors import RunDirError
    from evalkit.results.storage import open_runs_dir

    url, _, name = bucket
    remote = open_runs_dir(url, "compare --runs-dir")
    with pytest.raises(RunDirError, match=r"^compare --runs-dir: cannot download s3://"
                       f"{name}/runs/gone.parquet .*credentials, and run again$"):
        remote.download_all([(f"{name}/runs/gone.parquet", tmp_path / "gone.parquet")])
