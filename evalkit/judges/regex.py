"""``regex``: does a column (the output by default) match a pattern? Vectorised with Arrow's
RE2 engine, so the pattern is RE2 syntax (no backreferences or look-around)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_one_of, check_re2, check_text_columns
from evalkit.judges._det import verdicts
from evalkit.plugin import Judge

__all__ = ["RegexConfig", "RegexJudge"]

_MODES = ("search", "fullmatch")


@dataclass(frozen=True)
class RegexConfig:
    pattern: str = "???"  # RE2 regex
    column: str = "output"  # record column to test
    mode: str = "search"  # search: anywhere in the text; fullmatch: the whole text
    ignore_case: bool = False  # case-insensitive matching
    expect: bool = True  # true: passed when it matches; false: passed when it does not

    def validate(self) -> None:
        check_one_of(self.mode, _MODES, "mode")
        check_text_columns([self.column], "column")
        check_re2(self.pattern, "pattern")


class RegexJudge(Judge):
    """value 1.0 when the text matches, 0.0 when not; ``passed`` is ``match == expect``; label
    ``match``/``no_match``, or under ``expect: false`` ``forbidden``/``clean``. A
    null cell is an error judgment (nothing to test), not a non-match."""

    Config = RegexConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: RegexConfig, ctx: object) -> None:
        self.config = config
        self.regex = (f"^(?:{config.pattern})$" if config.mode == "fullmatch"
                      else config.pattern)
        if config.mode == "fullmatch":
            self.regex = "(?s)" + self.regex

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        cfg = self.config
        text = table.column(cfg.column)
        matched = pc.match_substring_regex(text, self.regex, ignore_case=cfg.ignore_case)
        passed = matched if cfg.expect else pc.invert(matched)
        missing = pc.is_null(text)
        return verdicts(table.column("record_id"), passed,
                        value=pc.cast(matched, pa.float64()),
                        labels=pc.if_else(matched, *(("match", "no_match") if cfg.expect
                                                     else ("forbidden", "clean"))),
                        status=pc.if_else(missing, "error", "ok"),
                        error=pc.if_else(missing, f"{cfg.column} is null: nothing to match",
                                         pa.scalar(None, pa.string())))
