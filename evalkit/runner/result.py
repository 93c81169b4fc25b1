"""What a finished run hands back to its caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = ["RunResult"]


@dataclass
class RunResult:
    run_id: str
    run_dir: Path | str  # a URL for a run on object storage
    manifest: dict[str, Any]
    metrics: pa.Table
    alerts: pa.Table
    judgment_counts: dict[str, dict[str, int]] = field(default_factory=dict)
