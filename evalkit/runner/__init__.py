"""Running an experiment: Hydra entry point, pipeline and summary."""
