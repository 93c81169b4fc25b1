"""Built-in sources: JSONL (plain or gzip) and CSV files."""
