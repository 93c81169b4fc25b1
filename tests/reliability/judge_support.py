"""What the judge reliability tests share: the fake model server and the judge helpers of
tests/judges/llm, a small data file, and ``evalkit run`` as a subprocess the way a user
runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

LLM_TESTS = Path(__file__).resolve().parents[1] / "judges" / "llm"
if str(LLM_TESTS) not in sys.path:
    sys.path.insert(0, str(LLM_TESTS))

from fake_llm_server import FakeLLMServer, Reply  # noqa: E402
from fault_plan import ANSWER, CAUSE, TRANSIENT, FaultPlan  # noqa: E402
from llm_helpers import judge, make, records  # noqa: E402

EVALKIT = str(Path(sys.executable).with_name("evalkit"))

__all__ = ["ANSWER", "CAUSE", "EVALKIT", "TRANSIENT", "FakeLLMServer", "FaultPlan", "Reply",
           "evalkit_run", "judge", "make", "records", "write_records"]


def write_records(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as a JSONL file (``id`` defaults to r<i>)."""
    path.write_text("".join(json.dumps({"id": f"r{i}", **row}) + "\n"
                            for i, row in enumerate(rows)))
    return path


def evalkit_run(*args: str, cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``evalkit run ARGS`` in ``cwd`` with the cache under ``cwd`` (not checked)."""
    full_env = {**os.environ, "COLUMNS": "200", "EVALKIT_CACHE_DIR": str(cwd / "cache"),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    return subprocess.run([EVALKIT, "run", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
