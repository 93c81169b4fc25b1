"""``contains``: does a column (the output by default) contain given substrings, or the
record's own reference? Fixed substrings are tested vectorised."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_one_of, check_text_columns
from evalkit.judges._det import verdicts
from evalkit.plugin import Judge

__all__ = ["ContainsConfig", "ContainsJudge"]

_MODES = ("any", "all")


@dataclass(frozen=True)
class ContainsConfig:
    values: list[str] = field(default_factory=list)  # substrings to look for
    reference_column: str | None = None  # also look for this record column's text
    column: str = "output"  # record column searched
    mode: str = "any"  # any: one is enough; all: every one must be there
    ignore_case: bool = False  # case-insensitive comparison
    expect: bool = True  # false: passed when the condition does NOT hold (forbidden text)

    def validate(self) -> None:
        if not self.values and self.reference_column is None:
            raise ValueError("set values (substrings) or reference_column")
        check_one_of(self.mode, _MODES, "mode")
        check_text_columns([self.column], "column")
        if self.reference_column is not None:
            check_text_columns([self.reference_column], "reference_column")


# the labels of a record where the condition holds / does not, by ``expect``: under
# ``expect: false`` the text is forbidden, and a passing record must not read as "missing"
_LABELS = {True: ("contains", "missing"), False: ("forbidden", "clean")}


class ContainsJudge(Judge):
    """value: share of the needles found (0..1); ``passed``: the ``mode`` condition holds
    (inverted when ``expect`` is false); label ``contains``/``missing``, or under ``expect:
    false`` ``forbidden``/``clean``. A null searched cell, or a null reference when
    that is the only needle, is an error judgment."""

    Config = ContainsConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: ContainsConfig, ctx: object) -> None:
        self.config = config

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        cfg = self.config
        text = table.column(cfg.column)
        n = table.num_rows
        found = np.zeros(n)
        needles = np.zeros(n)
        for value in cfg.values:
            hit = pc.match_substring(text, value, ignore_case=cfg.ignore_case)
            found += np.asarray(pc.fill_null(hit, False), dtype=float)
            needles += 1
        if cfg.reference_column is not None:
            fold = str.casefold if cfg.ignore_case else (lambda s: s)
            refs = table.column(cfg.reference_column).to_pylist()
            for i, (t, r) in enumerate(zip(text.to_pylist(), refs, strict=True)):
                if r is not None:
                    needles[i] += 1
                    found[i] += t is not None and fold(r) in fold(t)
        errors = [
            f"{cfg.column} is null" if t is None else
            f"{cfg.reference_column} is null: nothing to look for" if k == 0 else None
            for t, k in zip(text.to_pylist(), needles, strict=True)
        ]
        ok = np.array([e is None for e in errors])
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(needles > 0, found / needles, np.nan)
        holds = found > 0 if cfg.mode == "any" else found == needles
        passed = holds if cfg.expect else ~holds
        return verdicts(
            table.column("record_id"),
            pa.array(passed, mask=~ok),
            value=pa.array(share, mask=~ok),
            labels=pa.array(np.where(holds, *_LABELS[cfg.expect]), mask=~ok),
            status=["ok" if e is None else "error" for e in errors],
            error=errors,
        )
