"""Running an experiment: Hydra entry point, pipeline and summary."""

__all__ = ["alerts", "app", "judging", "limit", "metrics", "pipeline", "result", "run", "summary"]
