"""``pipeline_failure`` as a judge: the same checks as the filter, written as judgments on
every record (excluded ones included), so failures are queryable beside the other judges
and a run without the filter can still count them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.analysis.pipeline_failure import PipelineFailureConfig, failure_reasons
from evalkit.judges._det import verdicts
from evalkit.plugin import Judge

__all__ = ["PipelineFailureJudge"]


class PipelineFailureJudge(Judge):
    """value 1.0 (label ``pipeline_failure``, not passed) when the output is not a completion,
    with the reason as the explanation; 0.0 (label ``completion``) otherwise."""

    Config = PipelineFailureConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)
    applies_to_excluded = True

    def __init__(self, name: str, config: PipelineFailureConfig, ctx: object) -> None:
        self.config = config

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        reason = failure_reasons(table, self.config)
        passed = pc.is_null(reason)
        return verdicts(table.column("record_id"), passed,
                        value=pc.cast(pc.invert(passed), pa.float64()),
                        pass_label="completion", fail_label="pipeline_failure",
                        explanation=reason)
