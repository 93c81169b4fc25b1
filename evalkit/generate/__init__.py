"""The generate stage: shadow evaluation. Recorded inputs are replayed through a candidate
model or prompt and each candidate output becomes a record of its own beside the recorded one
(``side='candidate'``), filtered and judged like any record, so that one run holds both sides
of a paired comparison (``evalkit compare RUN:recorded RUN:candidate``).

The stage is a plugin kind (entry point group ``evalkit.generators``, contract
:class:`evalkit.plugin.Generator`); the built-in ``llm`` generator (:mod:`.llm`) calls any
model through the LLM judges' engine (cache, limits, retries, cost, dry-run pricing, an
offline seeded mode). The runner's side of it: :mod:`evalkit.runner.generate`."""

__all__ = ["llm"]
