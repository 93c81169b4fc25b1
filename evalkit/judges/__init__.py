"""Built-in judges: deterministic ones over whole batches, LLM ones through the engine."""

__all__ = [
    "contains", "exact_match", "failure_mode", "json_schema", "llm", "pipeline_failure",
    "prompt_echo", "regex", "state_check", "token_overlap", "tool_success_mismatch",
]
