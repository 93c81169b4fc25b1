"""What a run with LLM judges says at the end and while it runs: an unknown price is
"unknown", never "$0.0000"; judgments served by the response cache are counted; progress bars
show the time left; a dry run's directory does not pass for a real run."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from evalkit.judges.llm._progress import spend_text

EVALKIT = [sys.executable, "-m", "evalkit"]
# an unknown model: no price in litellm's map, no input/output_cost_per_mtok
ARGS = ["+experiment=llm_judge", "judges.qag_faithfulness.model=openai/judge-a",
        "judges.hallucination_llm.model=openai/judge-a", "source.limit=4"]


def _run(args: list[str], cwd: Path, api_base: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "EVALKIT_JUDGE_API_BASE": api_base, "COLUMNS": "200",
           "EVALKIT_CACHE_DIR": str(cwd / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([*EVALKIT, "run", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _manifests(cwd: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in
            sorted((cwd / "runs").glob("llm_judge/*/manifest.json"), key=os.path.getmtime)]


def test_spend_text() -> None:
    assert spend_text(0.0, 0) == "$0.0000"
    assert spend_text(0.0123, 0) == "$0.0123"
    assert spend_text(0.0, 3) == "unknown"
    assert spend_text(0.5, 3) == "$0.5000 + unknown"


def test_unknown_price_then_cache_hits_in_the_summary(tmp_path: Path, fake_llm) -> None:
    first = _run(ARGS, tmp_path, fake_llm.url).stdout
    assert "judge spend unknown (" in first and "$0.0000" not in first
    assert "from the response cache" not in first
    calls = len(fake_llm.requests)
    again = _run(ARGS, tmp_path, fake_llm.url).stdout
    assert len(fake_llm.requests) == calls  # nothing was asked again
    manifest = _manifests(tmp_path)[-1]
    cached = manifest["judgments_cached"]
    assert cached["hallucination_llm"] == manifest["judgments"]["hallucination_llm"]["ok"] > 0
    assert f"{sum(cached.values())} judgments came from the response cache" in again
    assert any("judge" in ln and "from cache" in ln for ln in again.splitlines())


def test_a_dry_run_is_marked_and_prices_unknown_models_as_unknown(tmp_path: Path,
                                                                   fake_llm) -> None:
    out = _run([*ARGS, "runner.dry_run=true"], tmp_path, fake_llm.url).stdout
    (manifest,) = _manifests(tmp_path)
    assert manifest["status"] == "dry_run"
    row = next(ln for ln in out.splitlines() if "hallucination_llm" in ln and "4" in ln)
    assert "unknown" in row and "$" not in row
    assert fake_llm.requests == []


def test_progress_bar_shows_time_left(monkeypatch) -> None:
    from rich.console import Console

    from evalkit.judges.llm import _progress

    buf = io.StringIO()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(_progress, "_console", lambda: Console(file=buf, force_terminal=True,
                                                                width=160))
    with _progress.JudgeProgress("judge_x", 4, enabled=True) as bar:
        bar.advance(False, None)
        bar.advance(False, 0.01)
        bar.progress.refresh()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())  # without the colours
    assert "judge_x" in text and "$0.0100 + unknown" in text
    # a time left, worked out from the calls done so far (rich shows -:--:-- until it can)
    assert re.search(r"eta \d+:\d\d:\d\d", text), text


def test_an_endpoints_refusals_and_settled_rate_in_the_manifest_and_summary(
        tmp_path: Path, fake_llm) -> None:
    from fake_llm_server import Reply

    fake_llm.push(*[Reply(status=429, delay=0.0, headers={"retry-after-ms": "20"})] * 3)
    out = _run(ARGS, tmp_path, fake_llm.url).stdout
    manifest = _manifests(tmp_path)[-1]
    [(endpoint, stats)] = manifest["endpoints"].items()
    assert endpoint.startswith("openai/judge-a @ 127.0.0.1:")
    assert stats["refusals"] == 3 and stats["rate_per_s"] > 0 and stats["paused_s"] > 0
    assert manifest["judgments"]["hallucination_llm"] == {"ok": 4}  # none lost to a 429
    assert re.search(rf"endpoint {re.escape(endpoint)}: 3 refused \(429\), 0 overloaded; "
                     r"settled at [\d.]+ calls/s", out)
