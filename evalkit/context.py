"""What a plugin knows about the run it belongs to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from evalkit.results.schemas import JUDGMENTS, RAW_LIMIT, conform


@dataclass
class RunContext:
    """The run a plugin works for: ids, directories, and the two side channels a source
    writes to (rejects and imported judgments)."""

    run_id: str
    experiment: str
    run_dir: Path
    runs_dir: Path
    cache_dir: Path
    dry_run: bool = False
    rejects: list[dict[str, Any]] = field(default_factory=list)
    imported: list[pa.Table] = field(default_factory=list)

    def reject(self, source: str, location: str, reason: str, raw: Any = None) -> None:
        """Record input that could not become a record; the run goes on."""
        text = raw if isinstance(raw, str) or raw is None else repr(raw)
        if text is not None and len(text) > RAW_LIMIT:
            text = text[:RAW_LIMIT] + f"… [{len(text) - RAW_LIMIT} more characters]"
        self.rejects.append(
            {"source": source, "location": location, "reason": reason, "raw": text}
        )

    def import_judgments(self, data: pa.Table | Iterable[Mapping[str, Any]]) -> None:
        """Scores the input already carries (another system's judge), kept as judgments with
        ``origin='imported'`` so they are audited like evalkit's own. Rows need
        ``record_id``, ``judge`` and a ``value`` or ``label``."""
        table = conform(data, JUDGMENTS, {"run_id": self.run_id, "origin": "imported",
                                          "status": "ok", "plugin": "imported"})
        if table.num_rows:
            self.imported.append(table)
