"""Built-in filters: they mark records to set aside, never drop them."""

__all__ = ["level", "models", "pipeline_failure", "sample", "sql", "time_range"]
