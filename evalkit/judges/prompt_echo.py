"""``prompt_echo``: flags outputs that copy their prompt instead of doing the task (failure
mode A of the audit: small models returning their input verbatim). The similarity itself:
:mod:`evalkit.analysis.echo` (the definition) and
:mod:`evalkit.analysis.echo_fast` (what runs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.analysis.echo_fast import echo_values
from evalkit.checks import check_text_columns, check_unit_interval
from evalkit.judges._det import verdicts
from evalkit.plugin import Judge

__all__ = ["PromptEchoConfig", "PromptEchoJudge"]


@dataclass(frozen=True)
class PromptEchoConfig:
    threshold: float = 0.9  # similarity at or above which the output is an echo
    against: list[str] = field(default_factory=lambda: ["input"])  # record columns to compare to
    ngram: int = 3  # words per shingle
    probe_chars: int = 30  # length of the three probes that gate the full comparison
    min_words: int = 3  # shorter outputs are echoes only when they equal the whole prompt

    def validate(self) -> None:
        check_unit_interval(self.threshold, "threshold")
        if self.ngram < 1:
            raise ValueError("ngram: must be at least 1")
        if self.min_words < 1:
            raise ValueError("min_words: must be at least 1")
        check_text_columns(self.against, "against")



class PromptEchoJudge(Judge):
    """value: echo similarity in [0, 1]; ``passed`` is false (label ``echo``) at or above the
    threshold."""

    Config = PromptEchoConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: PromptEchoConfig, ctx: object) -> None:
        self.config = config

    def wanted_columns(self) -> list[str]:
        """The record columns :meth:`judge` reads."""
        return ["output", *self.config.against]

    def judge(self, batch: pa.Table) -> pa.Table:
        """One judgment per record; a null output is an error judgment (nothing to compare)."""
        cfg = self.config
        values = echo_values(batch.column("output"), [batch.column(c) for c in cfg.against],
                             cfg.ngram, cfg.probe_chars, cfg.min_words)
        value = pa.array(values, pa.float64(), mask=np.isnan(values))
        passed = pc.less(value, cfg.threshold)
        missing = pc.is_null(value)
        return verdicts(batch.column("record_id"), passed, value=value,
                        labels=pc.if_else(passed, "no_echo", "echo"),
                        status=pc.if_else(missing, "error", "ok"),
                        error=pc.if_else(missing, "output is null: nothing to compare",
                                         pa.scalar(None, pa.string())))
