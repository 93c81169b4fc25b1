"""Real runs for the report tests, made once per session the way a user makes them: the
quickstart (with ``runner.report=true``), the audit, judge agreement, a sweep of two
quickstart runs (one page for both) and a run of every operational metric over hostile text."""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, run_dirs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer  # noqa: E402

HERE = Path(__file__).parent
PWNED = "</script><script>window.__pwned = 1</script><!-- <img src=x onerror=window.__pwned=2>"
HOSTILE_MODEL = "<b>m</b>$x$ & \"q\""


def write_signals(path: Path, n: int = 240, seed: int = 3) -> None:
    """Records with confidences, outcomes, user actions, latencies, costs, tool results and
    hostile text; a tenth are failed calls."""
    rng = random.Random(seed)
    models = ["alpha-1", "beta-2", HOSTILE_MODEL]
    with path.open("w") as f:
        for i in range(n):
            conf = rng.random()
            ok = rng.random() < conf
            row = {
                "id": f"sig-{i:04d}", "model": models[i % 3],
                "input": f"question {i}: what is {i} + {i}?",
                "output": (PWNED if i % 17 == 0 else f"The answer is {2 * i}."),
                "confidence": round(conf, 3), "outcome": "success" if ok else "failure",
                "user_action": rng.choice(["accepted", "edited", "bypassed"]),
                "latency_s": round(rng.lognormvariate(0, 0.5), 3),
                "cost_usd": round(rng.random() / 1000, 6),
                "context": [json.dumps({"tool": "sh", "exit_code": 1 if i % 5 == 0 else 0,
                                        "stderr": "boom" if i % 5 == 0 else ""})],
            }
            if i % 10 == 9:
                row.update(level="ERROR", output=None, status_message="HTTP 500")
            f.write(json.dumps(row) + "\n")


@dataclass
class Runs:
    root: Path
    quickstart: Path
    audit: Path
    judge_agreement: Path
    signals: Path
    llm_judge: Path
    sweep: list[Path]
    sweep_page: Path
    quickstart_stdout: str


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("report-runs")
    data = root / "signals.jsonl"
    write_signals(data)
    env = {"EVALKIT_USER_CONF": str(HERE / "conf"), "EVALKIT_TEST_SIGNALS": str(data)}
    quick = run_cli("run", "+experiment=quickstart", "runner.report=true", cwd=root, env=env)
    for exp in ("audit", "judge_agreement", "report_signals"):
        run_cli("run", f"+experiment={exp}", "runner.summary=false", "runner.report=true",
                cwd=root, env=env)
    server = FakeLLMServer().start()  # the LLM judges' exchanges, against the fake model
    try:
        run_cli("run", "+experiment=llm_judge", "source.limit=30", "runner.summary=false",
                "runner.report=true", "judges.qag_faithfulness.model=openai/judge-a",
                "judges.hallucination_llm.model=openai/judge-a", cwd=root,
                # (a cache of its own: an answer cached by a run against an earlier fake
                # server on the same port would not be bought, nor counted unpriced)
                env={**env, "EVALKIT_JUDGE_API_BASE": server.url,
                     "EVALKIT_CACHE_DIR": str(root / "llm-cache")})
    finally:
        server.stop()
    sweep_root = root / "sweep"
    sweep_root.mkdir()
    proc = run_cli("run", "-m", "+experiment=quickstart", "runner.summary=false",
                   "runner.report=true", "runner.report_n_boot=10",
                   "judges.prompt_echo.threshold=0.5,0.9",
                   cwd=sweep_root, env=env)
    sweep = [d for d in run_dirs(sweep_root, "quickstart") if not d.name.startswith("sweep-")]
    pages = [d for d in run_dirs(sweep_root, "quickstart") if d.name.startswith("sweep-")]
    assert len(sweep) == 2 and len(pages) == 1, proc.stdout + proc.stderr

    def one(exp: str) -> Path:
        (d,) = run_dirs(root, exp)
        return d

    return Runs(root, one("quickstart"), one("audit"), one("judge_agreement"),
                one("report_signals"), one("llm_judge"), sweep, pages[0], quick.stdout)


REQUIRED = os.environ.get("EVALKIT_REQUIRE_BROWSER") == "1"


def chromium_path() -> str | None:
    """The system's Chromium (Debian's package), or ``EVALKIT_CHROMIUM``."""
    return os.environ.get("EVALKIT_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if chromium_path() is None:
        return ("no Chromium on this machine (Debian: apt-get install chromium; or set "
                "EVALKIT_CHROMIUM)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """A banner when the browser tests did not run: a skip must not pass unnoticed."""
    why = browser_missing()
    if why is None:
        return
    tr = terminalreporter
    tr.write_sep("!", "REPORT BROWSER TESTS SKIPPED", red=True, bold=True)
    tr.write_line(f"tests/report/test_browser.py did not run: {why}.", red=True, bold=True)
    tr.write_line("The HTML report was not checked in a browser; .ci/run installs Chromium "
                  "and requires these tests.", red=True)
