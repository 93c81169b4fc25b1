"""The sinks' tests share the Langfuse source tests' fake server (tests/sources/langfuse)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources" / "langfuse"))

from tests.sources.langfuse.conftest import fake_v4  # noqa: E402,F401  (a fixture)
