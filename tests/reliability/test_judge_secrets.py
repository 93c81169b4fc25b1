"""Secrets: with keys in the environment, in config interpolation and inside URLs (user-info
and query), and a judge server that echoes the credentials it receives, nothing a run
writes or prints contains them: the run directories, the response cache, the sweep
directory with its multirun.yaml, the run's HTML report), stdout and stderr (also of
``evalkit push``), the scores pushed to (fake) Langfuse.
Everything under the test's directory is read, not a list of known files."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.reliability.judge_support import EVALKIT, Reply, evalkit_run, write_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources" / "langfuse"))
from fake_server import PUBLIC_KEY, SECRET_KEY, FakeLangfuse  # noqa: E402

ENV_KEY = "sk-openai-ENVSECRET-0123456789"  # OPENAI_API_KEY, sent by one judge as Bearer
CRED = "cred-NOTNAMED-5555555"  # in JUDGE_CRED, a variable whose name says nothing
URL_USER, URL_PASS = "svc-user", "urlpass-ABC/DEF-777"  # user-info of JUDGE_BASE
QUERY_KEY = "qkey-XYZ-424242"  # ?key= of JUDGE_BASE
SWEEP = ("sweeppass-one-1111", "sweeppass-two-2222")  # literal URLs on a -m command line
OVERRIDE_KEY = "override-key-987654321"  # a secret-named key set on the command line

EXPERIMENT = """# @package _global_
defaults:
  - override /source: jsonl
  - override /judges: [hallucination_llm, correctness_llm]
experiment: secrets
source:
  path: ${oc.env:DATA}
  record_id: id
judges:
  hallucination_llm:
    model: openai/judge-a
    api_base: ${oc.env:JUDGE_BASE}
    api_key_env: JUDGE_CRED
    max_retries: 0
    parse_retries: 0
  correctness_llm:
    model: openai/judge-b
    api_base: ${oc.env:JUDGE_BASE}
    api_key_env: OPENAI_API_KEY
"""


def _variants(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), json.dumps(secret)[1:-1]}


@pytest.fixture
def langfuse():
    fake = FakeLangfuse("v4")
    url = fake.start()
    yield fake, url
    fake.stop()


def test_no_secret_is_written_or_printed(tmp_path, server, langfuse):
    fake_lf, lf_url = langfuse
    server.echo_credentials = True
    # the first calls fail with a 401 whose body quotes what the server received
    server.push(*[Reply(status=401)] * 3)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "secrets.yaml").write_text(EXPERIMENT)
    data = write_records(tmp_path / "data.jsonl", [
        {"input": f"Question {i}?", "output": f"Answer {i}: Paris.", "reference": "Paris.",
         "trace_id": f"trace-{i}",
         "context": ["Paris is the capital of France."]} for i in range(12)])
    base = f"http://{URL_USER}:{quote(URL_PASS, safe='')}@127.0.0.1:{server.port}/v1" \
           f"?key={QUERY_KEY}"
    env = {"OPENAI_API_KEY": ENV_KEY, "JUDGE_CRED": CRED, "JUDGE_BASE": base, "DATA": str(data),
           "LANGFUSE_HOST": lf_url, "LANGFUSE_PUBLIC_KEY": PUBLIC_KEY,
           "LANGFUSE_SECRET_KEY": SECRET_KEY}
    runs = tmp_path / "runs"
    outputs = []
    # (its judges fail on purpose, echoing keys: no error budget)
    one = evalkit_run("+experiment=secrets", f"runner.runs_dir={runs}", "-v",
                      "runner.max_judge_error_rate=null",
                      "runner.report=true",
                      "+sinks.langfuse.plugin=langfuse", "+sinks.langfuse.include_errors=true",
                      f"+judges.correctness_llm.params.api_key={OVERRIDE_KEY}",
                      cwd=tmp_path, env=env)
    outputs.append(one)
    assert one.returncode == 0, one.stderr[-3000:]
    [first] = [p.parent for p in runs.glob("secrets/*/manifest.json")]
    assert (first / "report.html").is_file()
    pushed = subprocess.run([EVALKIT, "push", str(first), "--to", "langfuse", "--json",
                             "--include-errors"], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, **env}, timeout=120)
    assert pushed.returncode == 0, pushed.stderr[-2000:]
    outputs.append(pushed)
    sweep_base = [f"http://u:{p}@127.0.0.1:{server.port}/v1" for p in SWEEP]
    swept = evalkit_run("-m", "+experiment=secrets", f"runner.runs_dir={runs}",
                        "runner.max_judge_error_rate=null",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}",
                        f"judges.hallucination_llm.api_base={','.join(sweep_base)}",
                        "judges.hallucination_llm.cache=false",
                        cwd=tmp_path, env=env)
    outputs.append(swept)
    assert swept.returncode == 0, swept.stderr[-3000:]
    manifests = [json.loads(p.read_text()) for p in runs.glob("secrets/*/manifest.json")]
    assert len(manifests) == 3 and {m["status"] for m in manifests} == {"ok"}
    # the sweep really ran on both endpoints, and the echoing server was heard
    assert (tmp_path / "sweep" / "multirun.yaml").is_file()
    assert {m["judgments"]["hallucination_llm"].get("error", 0) for m in manifests} & {1, 2, 3}
    assert fake_lf.received, "no score was pushed"
    sent_auth = {r["headers"].get("Authorization") for r in server.requests}
    assert f"Bearer {CRED}" in sent_auth and f"Bearer {ENV_KEY}" in sent_auth
    assert any(r["query"].get("key") == QUERY_KEY for r in server.requests)
    assert any(OVERRIDE_KEY == r["body"].get("api_key") for r in server.requests)

    secrets = {ENV_KEY, CRED, URL_PASS, QUERY_KEY, *SWEEP, OVERRIDE_KEY, SECRET_KEY,
               base64.b64encode(f"{URL_USER}:{URL_PASS}".encode()).decode()}
    needles = {v for s in secrets for v in _variants(s)}
    found = []
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in (
        "data.jsonl", "secrets.yaml")]
    assert any(p.name.endswith(".sqlite") for p in written)  # the cache is among them
    for path in written:
        blob = path.read_bytes()
        found += [(str(path.relative_to(tmp_path)), n) for n in needles if n.encode() in blob]
    for i, proc in enumerate(outputs):
        for stream in ("stdout", "stderr"):
            text = getattr(proc, stream)
            found += [(f"run {i} {stream}", n) for n in needles if n in text]
    pushed = json.dumps(fake_lf.received)
    found += [("langfuse payloads", n) for n in needles if n in pushed]
    assert found == [], found
    # what was masked says so
    errors = [m for m in manifests if m["judgments"]["hallucination_llm"].get("error")]
    assert errors
