"""The fast echo similarity (evalkit.analysis.echo_fast: distinct cells, vectorised
normalisation, a byte table for ASCII, threads, substring or set n-gram counts) gives the
values of the plain definition (evalkit.analysis.echo, one pair at a time) on random
columns: copies, partial copies, chat JSON, short answers, Unicode, repeats and nulls."""

from __future__ import annotations

import functools
import json
import random

import numpy as np
import pyarrow as pa
import pytest

from evalkit.analysis import echo, echo_fast

WORDS = ["the", "cat", "sat", "on", "mat", "report", "sales", "rose", "Zürich", "naïve",
         "résumé", "x_1", "42", "É", "«", "»", "—", "🙂", "yes", "no", "item", "ĳ", "İstanbul"]


def _text(rng: random.Random, n: int) -> str:
    sep = rng.choice([" ", "  ", ", ", "\n", "\u00a0", "-"])
    return sep.join(rng.choice(WORDS) for _ in range(n))


def _pair(rng: random.Random) -> tuple[str | None, str | None]:
    prompt = _text(rng, rng.randint(0, 60))
    if rng.random() < 0.3:  # a chat prompt
        prompt = json.dumps([{"role": "system", "content": _text(rng, rng.randint(1, 20))},
                             {"role": "user", "content": prompt}])
    kind = rng.random()
    words = prompt.split()
    if kind < 0.2:
        output = prompt  # a verbatim echo
    elif kind < 0.45 and words:  # a partial copy, changed in case and spacing
        k = rng.randint(0, len(words) - 1)
        output = " ".join(words[k:k + rng.randint(1, 40)]).upper()
    elif kind < 0.6:
        output = rng.choice(["yes", "no", "item", "cat", "Yes!"])  # short answers
    elif kind < 0.7:
        output = json.dumps({"answer": _text(rng, rng.randint(1, 10))})
    else:
        output = _text(rng, rng.randint(0, 80))
    if rng.random() < 0.05:
        output = None
    if rng.random() < 0.05:
        prompt = None
    return output, prompt


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The definition normalises each text with Arrow's regex kernels, one call per text:
    remembering what it already normalised keeps the test fast (a pure function)."""
    monkeypatch.setattr(echo, "normalise_text", functools.lru_cache(None)(echo.normalise_text))


@pytest.mark.parametrize("seed", range(3))
def test_fast_equals_the_definition_on_random_columns(seed, monkeypatch, plain):
    rng = random.Random(seed)
    pairs = [_pair(rng) for _ in range(200)]
    pairs += pairs[:30]  # repeats: deduplicated cells and pairs
    outputs = [o for o, _ in pairs]
    prompts = [p for _, p in pairs]
    others = [rng.choice([p, o, None, "zzz"]) for o, p in pairs]  # a second prompt column
    if seed % 2:  # many texts: split over threads
        monkeypatch.setattr(echo_fast, "_SPLIT_MIN", 8)
        monkeypatch.setattr(echo_fast.os, "cpu_count", lambda: 3)
    for ngram, probe, min_words in [(3, 30, 3), (2, 10, 1), (4, 60, 5)]:
        fast = echo_fast.echo_values(pa.array(outputs, pa.string()),
                                     [pa.array(prompts, pa.string()),
                                      pa.array(others, pa.string())],
                                     ngram, probe, min_words)
        plain = [np.nan if o is None else max(
            echo.echo_similarity(o, p, ngram, probe, min_words) if p is not None else 0.0
            for p in (a, b)) for o, a, b in zip(outputs, prompts, others, strict=True)]
        assert np.allclose(fast, plain, equal_nan=True, rtol=0, atol=1e-12), [
            (o, p, f, v) for o, p, f, v in zip(outputs, prompts, fast, plain, strict=True)
            if not (np.isnan(f) and np.isnan(v)) and f != pytest.approx(v)][:3]


def test_fast_normalisation_equals_the_definition():
    rng = random.Random(11)
    texts = [None if rng.random() < 0.05 else _pair(rng)[1] or "" for _ in range(200)]
    fast = echo_fast.normalise(pa.array(texts, pa.string())).to_pylist()
    assert fast == [echo.normalise_text(t) for t in texts]
