"""LLM judges and the engine under them. Importing this package is cheap: litellm is imported
only when a call actually goes through the litellm transport."""

from evalkit.judges.llm._base import LlmJudge, LlmJudgeConfig
from evalkit.judges.llm._engine import CallPolicy, CallResult, Engine, get_engine, resolve_endpoint
from evalkit.judges.llm.failure_mode import (
    FAILURE_MODES,
    FailureModeLlmConfig,
    FailureModeLlmJudge,
    classify_failure_modes,
)

__all__ = ["CallPolicy", "CallResult", "Engine", "FAILURE_MODES", "FailureModeLlmConfig",
           "FailureModeLlmJudge", "LlmJudge", "LlmJudgeConfig", "classify_failure_modes",
           "get_engine", "resolve_endpoint"]
