"""``exact_match``: is the output (after optional normalisation) the reference? Text
normalisation is vectorised; ``json: true`` compares parsed JSON instead, so key order and
spacing do not matter."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_text_columns
from evalkit.judges._det import strip_code_fence, verdicts
from evalkit.paths import parse_json
from evalkit.plugin import Judge

__all__ = ["ExactMatchConfig", "ExactMatchJudge"]


@dataclass(frozen=True)
class ExactMatchConfig:
    column: str = "output"  # record column compared
    reference_column: str = "reference"  # record column holding the expected answer
    strip: bool = True  # ignore leading and trailing whitespace
    ignore_case: bool = False  # compare case-insensitively
    collapse_whitespace: bool = False  # treat any run of whitespace as one space
    json: bool = False  # compare as JSON values (a code fence around the output is ignored)

    def validate(self) -> None:
        for key in ("column", "reference_column"):
            check_text_columns([getattr(self, key)], key)


def _canonical_json(text: str | None) -> str | None:
    if text is None:
        return None
    ok, value = parse_json(strip_code_fence(text))
    return json.dumps(value, sort_keys=True, ensure_ascii=False) if ok else None


class ExactMatchJudge(Judge):
    """value 1.0 when equal, 0.0 when not. A null output or reference is an error judgment;
    with ``json``, so is a side that is not JSON."""

    Config = ExactMatchConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: ExactMatchConfig, ctx: object) -> None:
        self.config = config

    def _normalise(self, col: pa.ChunkedArray) -> pa.ChunkedArray:
        cfg = self.config
        if cfg.json:
            return pa.chunked_array([pa.array([_canonical_json(t) for t in col.to_pylist()],
                                              pa.string())])
        if cfg.collapse_whitespace:
            col = pc.replace_substring_regex(col, r"\s+", " ")
        if cfg.strip:
            col = pc.utf8_trim_whitespace(col)
        if cfg.ignore_case:
            col = pc.utf8_lower(col)
        return col

    def judge(self, table: pa.Table) -> pa.Table:
        """One judgment per record."""
        cfg = self.config
        out, ref = table.column(cfg.column), table.column(cfg.reference_column)
        a, b = self._normalise(out), self._normalise(ref)
        equal = pc.equal(a, b)
        what = "not JSON" if cfg.json else "null"
        error = pc.case_when(
            pc.make_struct(pc.is_null(out), pc.is_null(ref), pc.is_null(a), pc.is_null(b)),
            f"{cfg.column} is null", f"{cfg.reference_column} is null",
            f"{cfg.column} is {what}", f"{cfg.reference_column} is {what}")
        return verdicts(table.column("record_id"), equal,
                        labels=pc.if_else(equal, "match", "mismatch"),
                        status=pc.if_else(pc.is_null(equal), "error", "ok"), error=error)
