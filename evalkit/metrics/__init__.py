"""Built-in metrics: DuckDB over a run's tables, by slice, with confidence intervals and the
denominators behind every number."""

__all__ = [
    "agreement", "citation_precision", "cost_per_success", "crosstab", "disagreements",
    "distribution", "ece", "judge_validation", "latency", "mean", "rate", "retrieval",
    "task_completion", "user_actions",
]
