"""``tool_success_mismatch``: failure mode C of the audit. A tool runner reported success
for a command that failed (non-zero exit code, stderr), and the model carried on as if it
had worked. The checks: :mod:`evalkit.analysis.tool_results`."""

from __future__ import annotations

import pyarrow as pa

from evalkit.analysis.tool_results import ToolResultCheck, ToolSuccessMismatchConfig
from evalkit.judges._det import verdicts
from evalkit.plugin import Judge

__all__ = ["ToolSuccessMismatchJudge"]


class ToolSuccessMismatchJudge(Judge):
    """value 1.0 (label ``mismatch``, not passed) when a tool result claims success while
    carrying failure and the output does not acknowledge it; 0.0 with label
    ``acknowledged`` when the output does, or ``consistent`` when no result contradicts
    itself. A record with no tool results is ``skipped`` (not applicable)."""

    Config = ToolSuccessMismatchConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: ToolSuccessMismatchConfig, ctx: object) -> None:
        self.config = config
        self.check = ToolResultCheck(config)

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        rows = self.check.classify_table(table)
        labels = [r[0] for r in rows]
        na = [lb == "no_tool_results" for lb in labels]
        return verdicts(
            table.column("record_id"),
            [None if skip else lb != "mismatch" for skip, lb in zip(na, labels, strict=True)],
            value=[None if skip else float(lb == "mismatch")
                   for skip, lb in zip(na, labels, strict=True)],
            labels=labels,
            status=["skipped" if skip else "ok" for skip in na],
            explanation=["not applicable: the record has no tool results" if skip else
                         "; ".join(m["evidence"][0] for m in d["mismatches"]) or None
                         for skip, (_, d) in zip(na, rows, strict=True)],
            details=[d or None for _, d in rows])
