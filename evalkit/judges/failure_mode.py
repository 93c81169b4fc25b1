"""``failure_mode``: which of the audit's failure modes a record shows.

Modes: ``pipeline_failure`` (not a completion at all), ``prompt_echo`` (A),
``fabricated_tool_api`` (B), ``tool_output_misinterpretation`` (C), ``instruction_skipping``
(D) and ``other``; ``none`` is a genuine completion with no failure mode. The deterministic
signals decide first, in that order of precedence: pipeline failure, prompt echo, tool
success mismatch. B, D and ``other`` need a reading of the task: with ``model`` set, the
records no rule decides go to the LLM half (the ``failure_mode_llm`` judge plugin), which
classifies them into B, D, ``other`` or ``none``; without a model they are ``none`` as far as
the rules can see, and ``details.unchecked`` names the modes no rule could check.

The judge labels every record it sees; which of them another judge flagged is joined in at
metric time (``crosstab`` with ``flagged_by``), so one run can break down the flags of any
number of judges."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.analysis.echo_fast import echo_similarities
from evalkit.analysis.pipeline_failure import PipelineFailureConfig, failure_reasons
from evalkit.analysis.tool_results import ToolResultCheck, ToolSuccessMismatchConfig
from evalkit.checks import check_text_columns, check_unit_interval
from evalkit.judges._det import verdicts
from evalkit.plugin import AsyncJudge, plugin_class

__all__ = ["MODES", "NONE", "FailureModeConfig", "FailureModeJudge"]

MODES = ("pipeline_failure", "prompt_echo", "fabricated_tool_api",
         "tool_output_misinterpretation", "instruction_skipping", "other")
NONE = "none"  # a genuine completion in which no failure mode was found
_RULES = ("pipeline_failure", "prompt_echo", "tool_output_misinterpretation")
_NEEDS_LLM = ("fabricated_tool_api", "instruction_skipping", "other")
_LLM_HALF = "failure_mode_llm"  # the judge plugin that classifies what no rule decides


@dataclass(frozen=True)
class FailureModeConfig:
    levels: list[str] = field(default_factory=lambda: ["ERROR"])  # levels meaning failure
    echo_threshold: float = 0.9  # prompt-echo similarity at or above which A is assigned
    echo_against: list[str] = field(default_factory=lambda: ["input"])  # columns echoed
    tool_sources: list[str] = field(  # where tool results are: context, input, output
        default_factory=lambda: ["context", "input", "output"])
    model: str | None = None  # LLM for what no rule decides (B, D, other); null: rules only
    llm: dict[str, Any] = field(default_factory=dict)  # more failure_mode_llm settings

    def llm_config(self) -> Any:
        """The config of the LLM half, a ``failure_mode_llm`` judge (``model`` set); that
        plugin is found through the registry, as any other."""
        try:
            return plugin_class("judges", _LLM_HALF).Config(model=self.model, records="all",
                                                             **self.llm)
        except TypeError as exc:
            raise ValueError(f"llm: {exc} (see `failure_mode_llm`'s settings)") from None

    def validate(self) -> None:
        if self.model is None and self.llm:
            raise ValueError("llm: settings for the LLM half need model too (model=...)")
        if self.model is not None:
            self.llm_config().validate()
        check_text_columns(self.echo_against, "echo_against")
        check_unit_interval(self.echo_threshold, "echo_threshold")
        ToolSuccessMismatchConfig(sources=list(self.tool_sources)).validate()


class FailureModeJudge(AsyncJudge):
    """label: the failure mode, or ``none`` for a genuine completion without one (rules only:
    none that the rules can see, with ``details.unchecked``); value and ``passed`` stay null
    because a mode is a category, not a score. ``details`` holds the signals behind the
    label. Records set aside by a filter for another reason than a pipeline failure are
    skipped."""

    Config = FailureModeConfig
    applies_to_excluded = True

    def __init__(self, name: str, config: FailureModeConfig, ctx: object) -> None:
        self.config = config
        self.llm = None
        self.judge_model = config.model
        if config.model is not None:
            self.llm = plugin_class("judges", _LLM_HALF)(name, config.llm_config(), ctx)
        self.failure_cfg = PipelineFailureConfig(levels=list(config.levels))
        self.tools = ToolResultCheck(ToolSuccessMismatchConfig(sources=list(config.tool_sources)))

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
            labels.append(NONE)
            explanations.append(
                "no pipeline failure, prompt echo or tool-output misinterpretation; "
                + ("the model reads it for the other modes" if self.llm is not None else
                   f"{', '.join(_NEEDS_LLM)} are not checked without a model (set model)"))
            details.append({
                "rule": None, "echo_similarity": round(echo, 4), "tool_check": tool_label,
                "checked": list(_RULES),
                "unchecked": [] if self.llm is not None else list(_NEEDS_LLM),
                "why": "not a pipeline failure, echo similarity below "
                       f"{cfg.echo_threshold}, no tool result that claims success while "
                       "failing unacknowledged"})
        n = table.num_rows
        return verdicts(table.column("record_id"), pa.nulls(n, pa.bool_()),
                        value=pa.nulls(n, pa.float64()), labels=labels, status=status,
                        explanation=explanations, details=details)

    def _undecided(self, table: pa.Table, verdict: pa.Table) -> pa.Table:
        """The records of ``table`` that no rule decided (the model reads them)."""
        return table.filter(pc.fill_null(pc.equal(verdict.column("label"), NONE), False))

    async def ajudge(self, table: pa.Table) -> pa.Table | list[dict[str, Any]]:
        """The deterministic verdicts; with ``model`` set, the undecided records are then
        classified by the LLM half (its errors stay errors, never a guessed mode)."""
        verdict = self.judge(table)
        if self.llm is None:
            return verdict
        undecided = self._undecided(table, verdict)
        if not undecided.num_rows:
            return verdict
        by_id = {row["record_id"]: row for row in await self.llm.ajudge(undecided)}
        rows = verdict.to_pylist()
        for row in rows:
            llm = by_id.get(row["record_id"])
            if llm is None:
                continue
            rules = json.loads(row["details"]) if row.get("details") else {}
            row.update({k: v for k, v in llm.items() if k != "details"})
            if llm["status"] != "ok":
                row["label"] = None  # an unanswered question is not 'none', nor a mode
            rules.pop("unchecked", None)
            row["details"] = {**rules, "rule": "llm", "llm": llm.get("details")}
            row["judge_model"] = self.config.model
        return rows

    def estimate(self, table: pa.Table) -> dict[str, Any]:
        """The LLM calls the undecided records would need (none without ``model``)."""
        if self.llm is None:
            return {"calls": 0}
        return self.llm.estimate(self._undecided(table, self.judge(table)))

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """The LLM half's endpoint, when it has one."""
        return self.llm.endpoint_stats() if self.llm is not None else {}

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
