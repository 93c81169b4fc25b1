"""``failure_mode``: which of the audit's failure modes a record shows.

Modes: ``pipeline_failure`` (not a completion at all), ``prompt_echo`` (A),
``fabricated_tool_api`` (B), ``tool_output_misinterpretation`` (C), ``instruction_skipping``
(D) and ``other``. The deterministic signals decide first, in that order of precedence:
pipeline failure, prompt echo, tool success mismatch. B, D and ``other`` need a reading of
the task, which is the LLM half's job (``evalkit.judges.llm``); until it is wired in,
records no rule decides are labelled ``undecided`` with the reason in ``details``.

The judge labels every record it sees; which of them another judge flagged is joined in at
metric time (``crosstab`` with ``flagged_by``), so one run can break down the flags of any
number of judges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from evalkit.filters.pipeline_failure import PipelineFailureConfig, failure_reasons
from evalkit.judges._det import verdicts
from evalkit.judges.prompt_echo import echo_similarities
from evalkit.judges.tool_success_mismatch import (
    ToolSuccessMismatchConfig,
    ToolSuccessMismatchJudge,
)

MODES = ("pipeline_failure", "prompt_echo", "fabricated_tool_api",
         "tool_output_misinterpretation", "instruction_skipping", "other")
UNDECIDED = "undecided"
_NEEDS_LLM = ("fabricated_tool_api", "instruction_skipping", "other")


@dataclass(frozen=True)
class FailureModeConfig:
    levels: list[str] = field(default_factory=lambda: ["ERROR"])  # levels meaning failure
    echo_threshold: float = 0.9  # prompt-echo similarity at or above which A is assigned
    echo_against: list[str] = field(default_factory=lambda: ["input"])  # columns echoed
    tool_sources: list[str] = field(default_factory=lambda: ["context", "input"])  # tool results
    model: str | None = None  # LLM for B, D and other (not available yet: leave null)

    def validate(self) -> None:
        if self.model is not None:
            raise ValueError(
                f"model: {self.model!r}: the LLM half of failure_mode (fabricated_tool_api, "
                "instruction_skipping, other) is provided by evalkit.judges.llm and is not "
                "wired into this judge yet; leave model null to get the deterministic modes "
                f"and '{UNDECIDED}' for the rest")
        if not 0.0 <= self.echo_threshold <= 1.0:
            raise ValueError(f"echo_threshold: {self.echo_threshold} is not within [0, 1]")
        ToolSuccessMismatchConfig(sources=list(self.tool_sources)).validate()


class FailureModeJudge:
    """label: the failure mode (or ``undecided``); value and ``passed`` stay null because a
    mode is a category, not a score. ``details`` holds the signals behind the label.
    Records set aside by a filter for another reason than a pipeline failure are skipped."""

    Config = FailureModeConfig
    applies_to_excluded = True

    def __init__(self, name: str, config: FailureModeConfig, ctx: object) -> None:
        self.config = config
        self.failure_cfg = PipelineFailureConfig(levels=list(config.levels))
        self.tools = ToolSuccessMismatchJudge(
            name, ToolSuccessMismatchConfig(sources=list(config.tool_sources)), ctx)

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        cfg = self.config
        reasons = failure_reasons(table, self.failure_cfg).to_pylist()
        excluded_by = table.column("excluded_by").to_pylist()
        exclude_reason = table.column("exclude_reason").to_pylist()
        echoes = echo_similarities(table.column("output"),
                                   [table.column(c) for c in cfg.echo_against])
        tool_checks = self.tools.classify_table(table)
        labels: list[str | None] = []
        status: list[str] = []
        explanations: list[str | None] = []
        details: list[dict[str, Any] | None] = []
        for i in range(table.num_rows):
            if reasons[i] is not None:
                labels.append("pipeline_failure")
                status.append("ok")
                explanations.append(reasons[i])
                details.append({"rule": "pipeline_failure", "reason": reasons[i]})
                continue
            if excluded_by[i] is not None:
                labels.append(None)
                status.append("skipped")
                explanations.append(f"excluded by filter {excluded_by[i]}: "
                                    f"{exclude_reason[i] or ''}".rstrip(": "))
                details.append(None)
                continue
            status.append("ok")
            echo = echoes[i] or 0.0
            if echo >= cfg.echo_threshold:
                labels.append("prompt_echo")
                explanations.append(f"output copies its prompt (similarity {echo:.2f})")
                details.append({"rule": "prompt_echo", "echo_similarity": round(echo, 4)})
                continue
            tool_label, tool_details = tool_checks[i]
            if tool_label == "mismatch":
                evidence = [e for m in tool_details["mismatches"] for e in m["evidence"]]
                labels.append("tool_output_misinterpretation")
                explanations.append("a tool result claimed success despite "
                                    + "; ".join(evidence[:3]))
                details.append({"rule": "tool_success_mismatch", "echo_similarity":
                                round(echo, 4), **tool_details})
                continue
            labels.append(UNDECIDED)
            explanations.append("no deterministic signal; "
                                f"{', '.join(_NEEDS_LLM)} need the LLM half")
            details.append({
                "rule": None, "echo_similarity": round(echo, 4), "tool_check": tool_label,
                "why": "not a pipeline failure, echo similarity below "
                       f"{cfg.echo_threshold}, no tool result that claims success while "
                       f"failing; {', '.join(_NEEDS_LLM)} need an LLM reading of the task "
                       "(evalkit.judges.llm), which this judge does not run yet"})
        n = table.num_rows
        return verdicts(table.column("record_id"), pa.nulls(n, pa.bool_()),
                        value=pa.nulls(n, pa.float64()), labels=labels, status=status,
                        explanation=explanations, details=details)


