"""litellm's own logging stays out of evalkit's output (issue 22): a judge on a non-OpenAI
provider (Anthropic's messages API, served by the fake server) goes through litellm, whose
INFO lines ("LiteLLM completion() model= ...") used to reach the console twice per call."""

from __future__ import annotations

import json
import logging
import re

from evalkit._log import log_level, take_verbose_flags
from tests.reliability.judge_support import evalkit_run, write_records

ROWS = [{"input": f"question {i}", "output": f"Paris is the capital of France {i}.",
         "context": ["Paris is the capital of France."]} for i in range(6)]
LITELLM_LINE = re.compile(r"LiteLLM|provider = |completion\(\)|Provider List")


def _args(tmp_path, server) -> list[str]:
    data = write_records(tmp_path / "data.jsonl", ROWS)
    return ["source=jsonl", f"source.path={data}", "+source.record_id=id",
            "judges=[hallucination_llm]",
            "judges.hallucination_llm.model=anthropic/claude-3-5-haiku-20241022",
            f"judges.hallucination_llm.api_base=http://127.0.0.1:{server.port}",
            f"runner.runs_dir={tmp_path / 'runs'}"]


def test_no_litellm_log_line_reaches_the_console(tmp_path, server):
    done = evalkit_run(*_args(tmp_path, server), cwd=tmp_path,
                       env={"ANTHROPIC_API_KEY": "sk-ant-fake-key-0123456789"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.requests and all(r.get("path") == "/v1/messages" for r in server.requests)
    [manifest] = (tmp_path / "runs").glob("*/*/manifest.json")
    assert json.loads(manifest.read_text())["judgments"]["hallucination_llm"]["ok"] == 6
    noise = [line for line in (done.stdout + done.stderr).splitlines()
             if LITELLM_LINE.search(line)]
    assert noise == [], noise


def test_asked_for_litellm_speaks_once_per_line(tmp_path, server):
    """Asked for (``-v``, which sets EVALKIT_LOG_LEVEL=INFO for the run), litellm's INFO
    lines show, once each (not again through Hydra's root handler)."""
    args = ["-v", *_args(tmp_path, server), "+judges.hallucination_llm.cache=false"]
    done = evalkit_run(*args, cwd=tmp_path, env={"ANTHROPIC_API_KEY": "sk-ant-fake-key-0123456789"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines()
             if "LiteLLM completion()" in line]
    assert len(lines) == len(ROWS), (done.stdout[-2000:], done.stderr[-2000:])


def test_verbose_flags_and_levels(monkeypatch):
    monkeypatch.setenv("EVALKIT_LOG_LEVEL", "")  # restored after the test, whatever it sets
    assert log_level() == logging.WARNING
    assert take_verbose_flags(["-m", "-v", "a=1"]) == ["-m", "a=1"]
    assert log_level() == logging.INFO
    take_verbose_flags(["-vv"])
    assert log_level() == logging.DEBUG
    monkeypatch.setenv("EVALKIT_LOG_LEVEL", "error")
    assert log_level() == logging.ERROR


def test_a_bad_log_level_is_a_one_line_error(tmp_path, server):
    done = evalkit_run(*_args(tmp_path, server), cwd=tmp_path,
                       env={"EVALKIT_LOG_LEVEL": "LOUD"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "evalkit: error: EVALKIT_LOG_LEVEL: 'LOUD' is not a log level; use DEBUG, INFO, "
        "WARNING or ERROR (default: WARNING)"]
