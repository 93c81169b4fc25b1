"""Built-in judges: deterministic ones over whole batches, LLM ones through the engine."""
