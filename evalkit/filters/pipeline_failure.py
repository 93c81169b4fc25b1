"""``pipeline_failure``: sets aside outputs that are not completions, so no judge scores
(or bills for) an infrastructure failure (the checks: :mod:`evalkit.analysis.pipeline_failure`)."""

from __future__ import annotations

import pyarrow as pa

from evalkit.analysis.pipeline_failure import PipelineFailureConfig, failure_reasons
from evalkit.plugin import Filter

__all__ = ["PipelineFailureFilter"]


class PipelineFailureFilter(Filter):
    """Marks records whose output is not a model completion, with the reason."""

    Config = PipelineFailureConfig

    def __init__(self, name: str, config: PipelineFailureConfig, ctx: object) -> None:
        self.config = config

    def mark(self, batch: pa.RecordBatch) -> pa.Array:
        """The failure reason of each row, or null for a genuine completion."""
        return failure_reasons(batch, self.config)
