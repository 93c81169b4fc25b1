"""Sinks: send a finished run's results somewhere else (``evalkit push``, or ``sinks:`` in a
config to push at the end of every run)."""

__all__ = ["langfuse"]
