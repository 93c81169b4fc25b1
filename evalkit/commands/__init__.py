
__all__ = ["compare", "completion", "plugins", "push", "query", "report"]
