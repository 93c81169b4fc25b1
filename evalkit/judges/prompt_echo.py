"""``prompt_echo``: flags outputs that copy their prompt instead of doing the task (failure
mode A of the audit: small models returning their input verbatim)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pyarrow as pa

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class PromptEchoConfig:
    threshold: float = 0.9  # similarity at or above which the output is an echo
    against: list[str] = field(default_factory=lambda: ["input"])  # record columns to compare to
    ngram: int = 3  # words per shingle
    probe_chars: int = 30  # length of the three probes that gate the full comparison

    def validate(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold: {self.threshold} is not within [0, 1]")
        if self.ngram < 1:
            raise ValueError("ngram: must be at least 1")


def _text(value: str | None) -> str:
    """Lower-cased words of a cell; JSON cells (chat messages) contribute their strings."""
    if not value:
        return ""
    if value[:1] in "[{":
        try:
            value = " ".join(_strings(json.loads(value)))
        except ValueError:
            pass
    return " ".join(_WORD.findall(value.lower()))


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _shingles(words: list[str], n: int) -> set[tuple[str, ...]]:
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def echo_similarity(output: str, prompt: str, ngram: int = 3, probe: int = 30) -> float:
    """Share of the output's word n-grams that also occur in the prompt (1.0: every part of
    the output is copied from the prompt). Both sides are normalised to lower-case words.
    Three probes (start, middle, end of the output) gate the full comparison: when none of
    them occurs in the prompt, the output copies no long span of it and scores 0."""
    out, src = _text(output), _text(prompt)
    if not out or not src:
        return 0.0
    if out == src or out in src:
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

    def judge(self, batch: pa.Table) -> pa.Table:
        cfg = self.config
        outputs = batch.column("output").to_pylist()
        sources = [batch.column(c).to_pylist() for c in cfg.against]
        values = []
        for i, out in enumerate(outputs):
            values.append(max((echo_similarity(out, s[i], cfg.ngram, cfg.probe_chars)
                               for s in sources if s[i]), default=0.0))
        passed = [v < cfg.threshold for v in values]
        return pa.table({
            "record_id": batch.column("record_id"),
            "value": pa.array(values, pa.float64()),
            "passed": pa.array(passed),
            "label": pa.array(["no_echo" if p else "echo" for p in passed]),
            "status": pa.array(["ok"] * len(values)),
        })
