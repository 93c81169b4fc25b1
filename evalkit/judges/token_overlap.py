"""``token_overlap``: the share of an output's words (or word n-grams) that appear nowhere in
the text it should be grounded in (retrieved context, knowledge snippet, the input). A cheap,
deterministic proxy for unsupported content: it cannot see paraphrase, synonyms or wrong
claims built from grounded words, so treat it as a baseline to measure agreement against,
not as a hallucination detector."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from evalkit.checks import check_unit_interval
from evalkit.plugin import Judge

__all__ = ["STOPWORDS", "TokenOverlapConfig", "TokenOverlapJudge", "units", "unsupported_share"]

_WORD = re.compile(r"\w+", re.UNICODE)

# English function words: they occur everywhere, so their overlap says nothing about grounding
STOPWORDS = frozenset("""
a an the and or but if then so of to in on at by for with from as into about over under
is are was were be been being am do does did have has had having i you he she it we they
me him her us them my your his its our their this that these those there here what which
who whom whose when where why how not no nor yes can could will would shall should may
might must just also very too than such some any all each both more most other own same
only s t m ll re ve d don doesn didn isn aren wasn weren won wouldn couldn shouldn
""".split())


@dataclass(frozen=True)
class TokenOverlapConfig:
    against: list[str] = field(default_factory=lambda: ["context", "input"])  # grounding columns
    ngram: int = 1  # words per unit; 2 or 3 asks for whole phrases to be grounded (stricter)
    threshold: float = 0.5  # flagged (passed false) when the unsupported share >= threshold
    stopwords: bool = True  # ignore common English function words

    def validate(self) -> None:
        if self.ngram < 1:
            raise ValueError("ngram: must be at least 1")
        check_unit_interval(self.threshold, "threshold")
        if not self.against:
            raise ValueError("against: name at least one record column (e.g. [context])")
        from evalkit.results.schemas import RECORDS

        bad = [c for c in self.against if c not in RECORDS.names]
        if bad:
            raise ValueError(f"against: {bad} are not record columns")


def units(text: str, ngram: int, stopwords: bool) -> list[tuple[str, ...]]:
    """The lower-cased word n-grams of ``text`` (function words dropped first)."""
    words = [w for w in _WORD.findall(text.lower()) if not (stopwords and w in STOPWORDS)]
    if len(words) < ngram:
        return [tuple(words)] if words else []
    return [tuple(words[i:i + ngram]) for i in range(len(words) - ngram + 1)]


def unsupported_share(output: str, grounding: str, ngram: int = 1,
                      stopwords: bool = True) -> float | None:
    """Share of the output's units absent from ``grounding`` (None: the output has none)."""
    out = units(output, ngram, stopwords)
    if not out:
        return None
    known = set(units(grounding, ngram, stopwords))
    return sum(u not in known for u in out) / len(out)


def _text(cell: object) -> str:
    if cell is None:
        return ""
    if isinstance(cell, list):
        return "\n".join(str(c) for c in cell if c is not None)
    return str(cell)


class TokenOverlapJudge(Judge):
    """value: the unsupported share in [0, 1] (1: no word of the output is grounded);
    ``passed`` is false (label ``unsupported``) at or above the threshold. An output with no
    content words, or a record with nothing to check against, is an error, not a score."""

    Config = TokenOverlapConfig
    thread_safe = True  # judge() may run on a thread of the runner (pure function of the batch)

    def __init__(self, name: str, config: TokenOverlapConfig, ctx: object) -> None:
        self.config = config

    def judge(self, batch: pa.Table) -> list[dict[str, object]]:
        cfg = self.config
        outputs = batch.column("output").to_pylist()
        grounds = [batch.column(c).to_pylist() for c in cfg.against]
        rows: list[dict[str, object]] = []
        for i, (rid, out) in enumerate(zip(batch.column("record_id").to_pylist(), outputs,
                                           strict=True)):
            grounding = "\n".join(_text(col[i]) for col in grounds).strip()
            if not grounding:
                rows.append({"record_id": rid, "status": "error",
                             "error": f"nothing to check against: {', '.join(cfg.against)} "
                             "empty"})
                continue
            share = unsupported_share(out or "", grounding, cfg.ngram, cfg.stopwords)
            if share is None:
                rows.append({"record_id": rid, "status": "error",
                             "error": "output has no content words to check"})
                continue
            passed = share < cfg.threshold
            rows.append({"record_id": rid, "status": "ok", "value": share, "passed": passed,
                         "label": "supported" if passed else "unsupported",
                         "explanation": f"{share:.0%} of the output's {cfg.ngram}-grams are "
                         f"absent from {'+'.join(cfg.against)}"})
        return rows
