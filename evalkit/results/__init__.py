"""Run tables: their schemas, the run writer and the DuckDB query layer."""
