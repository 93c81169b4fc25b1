"""The S3-compatible test server (moto's, on 127.0.0.1) the object-storage tests share: one
server for the session, a fresh bucket per test."""

from __future__ import annotations

import os

import pytest

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@pytest.fixture(scope="session")
def s3_server():
    """The port of a moto S3 server on 127.0.0.1, started once for the session."""
    import logging

    pytest.importorskip("moto.server")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # (a line per request otherwise)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    yield port
    server.stop()


@pytest.fixture
def bucket(s3_server: int, monkeypatch: pytest.MonkeyPatch):
    """A fresh bucket, with the test credentials in this process's environment for the
    test; yields ``(url of runs/ in it, pyarrow filesystem, bucket name)``."""
    import uuid

    import pyarrow.fs as pafs

    for key, value in FAKE_ENV.items():
        monkeypatch.setenv(key, value)
    name = f"b-{uuid.uuid4().hex[:12]}"
    fs = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{s3_server}", scheme="http",
                           allow_bucket_creation=True)
    fs.create_dir(name)
    yield f"s3://{name}/runs?endpoint_override=127.0.0.1:{s3_server}&scheme=http", fs, name


def objects(fs, name: str) -> dict[str, int]:
    """Every object in bucket ``name``: its key (without the bucket) and size."""
    import pyarrow.fs as pafs

    infos = fs.get_file_info(pafs.FileSelector(name, recursive=True, allow_not_found=True))
    return {i.path.removeprefix(name + "/"): i.size for i in infos
            if i.type == pafs.FileType.File}


def query_csv(url: str, sql: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``evalkit query --runs-dir URL SQL --format csv``, in this process: its lines."""
    from evalkit.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["query", "--runs-dir", url, sql, "--format", "csv"])
    assert done.value.code == 0
    return capsys.readouterr().out.split()
