"""Built-in sources: JSONL (plain or gzip) and CSV files."""

__all__ = ["csv", "files", "jsonl", "langfuse"]
