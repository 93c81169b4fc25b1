"""Analyses of records that more than one plugin needs (why an output is not a completion,
how much it echoes its prompt, tool results that contradict themselves, citations, ranking).
Plain functions over Arrow columns and Python values: no plugin lives here, and nothing here
imports a plugin module."""

__all__ = ["citations", "echo", "echo_fast", "metadata", "pipeline_failure", "ranking",
           "tool_results"]
