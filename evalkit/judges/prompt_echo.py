"""``prompt_echo``: flags outputs that copy their prompt instead of doing the task (failure
mode A of the audit: small models returning their input verbatim)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pyarrow as pa

from evalkit.errors import ConfigError
from evalkit.judges._det import verdicts
from evalkit.results.schemas import RECORDS

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class PromptEchoConfig:
    threshold: float = 0.9  # similarity at or above which the output is an echo
    against: list[str] = field(default_factory=lambda: ["input"])  # record columns to compare to
    ngram: int = 3  # words per shingle
    probe_chars: int = 30  # length of the three probes that gate the full comparison
    min_words: int = 3  # shorter outputs are echoes only when they equal the whole prompt

    def validate(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold: {self.threshold} is not within [0, 1]")
        if self.ngram < 1:
            raise ValueError("ngram: must be at least 1")
        if self.min_words < 1:
            raise ValueError("min_words: must be at least 1")


def _segments(value: str | None) -> list[str]:
    """The lower-cased words of a cell, one string per part: a JSON cell (chat messages)
    contributes each message's content (roles and names are not text the model saw as
    prose), any other JSON its strings, plain text itself."""
    if not value:
        return []
    parts = [value]
    if value[:1] in "[{":
        try:
            parts = _strings(json.loads(value))
        except ValueError:
            pass
    words = (" ".join(_WORD.findall(p.lower())) for p in parts)
    return [w for w in words if w]


def _text(value: str | None) -> str:
    """Lower-cased words of a cell (see :func:`_segments`), joined."""
    return " ".join(_segments(value))


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        if "content" in obj:  # a chat message: its content only
            return _strings(obj["content"])
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _shingles(words: list[str], n: int) -> set[tuple[str, ...]]:
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def echo_similarity(output: str, prompt: str, ngram: int = 3, probe: int = 30,
                    min_words: int = 3) -> float:
    """Share of the output's word n-grams that also occur in the prompt (1.0: every part of
    the output is copied from the prompt). Both sides are normalised to lower-case words.
    An output of fewer than ``min_words`` words ("yes", a label the prompt lists) scores 1.0
    only when it is the whole prompt or one whole message of it, else 0. Three probes
    (start, middle, end of the output) gate the full comparison: when none of them occurs
    in the prompt, the output copies no long span of it and scores 0."""
    out, pieces = _text(output), _segments(prompt)
    src = " ".join(pieces)
    if not out or not src:
        return 0.0
    if out == src or out in pieces:
        return 1.0
    if out.count(" ") + 1 < min_words:
        return 0.0
    if f" {out} " in f" {src} ":
        return 1.0
    if len(out) > probe:
        mid = len(out) // 2
        probes = (out[:probe], out[mid - probe // 2: mid + probe // 2], out[-probe:])
        if not any(p in src for p in probes):
            return 0.0
    a = _shingles(out.split(), ngram)
    return len(a & _shingles(src.split(), ngram)) / len(a) if a else 0.0


class PromptEchoJudge:
    """value: echo similarity in [0, 1]; ``passed`` is false (label ``echo``) at or above the
    threshold."""

    Config = PromptEchoConfig

    def __init__(self, name: str, config: PromptEchoConfig, ctx: object) -> None:
        self.config = config
        bad = [c for c in config.against if c not in RECORDS.names
               or not pa.types.is_string(RECORDS.field(c).type)]
        if bad:
            raise ConfigError(f"judges.{name}.against: {bad} are not text record columns")

    def judge(self, batch: pa.Table) -> pa.Table:
        """One judgment per record; a null output is an error judgment (nothing to compare)."""
        cfg = self.config
        outputs = batch.column("output").to_pylist()
        sources = [batch.column(c).to_pylist() for c in cfg.against]
        values: list[float | None] = []
        for i, out in enumerate(outputs):
            if out is None:
                values.append(None)
                continue
            values.append(max((echo_similarity(out, s[i], cfg.ngram, cfg.probe_chars,
                                               cfg.min_words)
                               for s in sources if s[i]), default=0.0))
        passed = [None if v is None else v < cfg.threshold for v in values]
        return verdicts(batch.column("record_id"), passed, value=values,
                        labels=[None if p is None else "no_echo" if p else "echo"
                                for p in passed],
                        status=["error" if v is None else "ok" for v in values],
                        error=[None if v is not None else "output is null: nothing to compare"
                               for v in values])
