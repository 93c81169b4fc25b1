"""Built-in metrics: DuckDB over a run's tables, by slice, with bootstrap CIs and the
denominators behind every number."""
