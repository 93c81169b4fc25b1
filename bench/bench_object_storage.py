"""Runs on object storage against moto's S3 server (its own process on 127.0.0.1): the
quickstart written to a local runs directory and to a bucket, and ``evalkit query`` over N
copies of it on disk and in the bucket, each a fresh process. moto answers each request in
milliseconds of Python, so the S3 figures are an upper bound of the client's own cost: a
real bucket adds its round trips, which the query layer makes in parallel (footers,
manifests) where it can.

    .venv/bin/python bench/bench_object_storage.py --runs 100 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EVALKIT = str(Path(sys.executable).with_name("evalkit"))
ENV = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret",
       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
       "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
QUERIES = {
    "runs": "SELECT count(*) FROM runs",
    "judgments by judge": "SELECT judge, avg(value) FROM judgments GROUP BY judge",
    "records filtered": "SELECT count(*) FROM records WHERE model = 'llama-3.2-3b'",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(*args: str, cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([EVALKIT, *args], cwd=cwd, env=ENV, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100, help="copies of the run to query")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http",
                               allow_bucket_creation=True, access_key="bench",
                               secret_key="bench-secret")
        for _ in range(50):
            try:
                fs.create_dir("bench")
                break
            except OSError:
                time.sleep(0.1)
        url = f"s3://bench/runs?endpoint_override=127.0.0.1:{port}&scheme=http"
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            run = ["run", "+experiment=quickstart", "runner.summary=false"]
            local_s = [_timed(*run, cwd=work) for _ in range(args.repeat)]
            s3_s = [_timed(*run, f"runner.runs_dir='{url}'", cwd=work)
                    for _ in range(args.repeat)]
            print(f"quickstart run: local {min(local_s):.2f} s, to S3 {min(s3_s):.2f} s "
                  f"(min of {args.repeat})")

            source = next((work / "runs" / "quickstart").iterdir())
            many = work / "many"
            for i in range(args.runs):
                pafs.copy_files(str(source), str(many / "quickstart" / f"r{i:05d}"))
            pafs.copy_files(str(many), "bench/many", destination_filesystem=fs)
            many_url = url.replace("/runs?", "/many?")
            objects = sum(1 for _ in many.rglob("*") if _.is_file())
            print(f"{args.runs} runs, {objects} objects each way:")
            for name, sql in QUERIES.items():
                local_q = min(_timed("query", "--runs-dir", str(many), sql, cwd=work)
                              for _ in range(args.repeat))
                s3_q = min(_timed("query", "--runs-dir", many_url, sql, cwd=work)
                           for _ in range(args.repeat))
                print(f"  {name:<20} local {local_q:.2f} s, S3 {s3_q:.2f} s")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
