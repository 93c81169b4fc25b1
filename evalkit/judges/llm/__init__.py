"""Built-in LLM judges and the engine under them. Importing this package is cheap: litellm is
imported only when a call actually goes through the litellm transport. A plugin author's LLM
judge builds on :mod:`evalkit.plugin` (``LlmJudge``), not on these modules."""

__all__ = [
    "citation_support", "context_relevance", "correctness", "failure_mode", "geval",
    "hallucination", "pairwise", "qag_faithfulness",
]
