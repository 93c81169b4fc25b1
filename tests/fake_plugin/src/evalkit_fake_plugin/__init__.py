"""A third-party plugin as the tests install it: one judge, and a metric that fails on
purpose so the tests can watch a run fail cleanly."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.plugin import Judge, Metric


@dataclass(frozen=True)
class WordCountConfig:
    max_words: int = 20  # outputs longer than this do not pass


class WordCountJudge(Judge):
    Config = WordCountConfig

    def __init__(self, name: str, config: WordCountConfig, ctx: object) -> None:
        self.config = config

    def judge(self, batch: pa.Table) -> pa.Table:
        words = pc.list_value_length(pc.utf8_split_whitespace(pc.fill_null(
            batch.column("output"), "")))
        return pa.table({"record_id": batch.column("record_id"),
                         "value": pc.cast(words, pa.float64()),
                         "passed": pc.less_equal(words, self.config.max_words),
                         "status": pa.array(["ok"] * batch.num_rows)})


@dataclass(frozen=True)
class BoomConfig:
    message: str = "boom"  # the error to raise


class BoomMetric(Metric):
    Config = BoomConfig
    higher_is_better = None

    def __init__(self, name: str, config: BoomConfig, ctx: object) -> None:
        self.config = config

    def compute(self, con: object) -> list:
        raise RuntimeError(self.config.message)
