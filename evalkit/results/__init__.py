"""Run tables: their schemas, the run writer and the DuckDB query layer."""

__all__ = ["columns", "query", "schemas", "writer"]
