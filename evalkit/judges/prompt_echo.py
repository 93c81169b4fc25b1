"""``prompt_echo``: flags outputs that copy their prompt instead of doing the task (failure
mode A of the audit: small models returning their input verbatim)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.checks import check_text_columns, check_unit_interval
from evalkit.judges._det import verdicts


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


# Normalisation, vectorised with Arrow (RE2): lower-case words (letters, digits, "_")
# joined by single spaces. A cell holding JSON (chat messages, a structured answer) loses
# its structure first: role/type values and object keys go, JSON escapes become spaces, so
# what remains is the text the model read or wrote.
_JSON_LIKE = r"^\s*[\[{]"
# one pass: role/type values, object keys, escapes (\n, \", \u00e9)
_JSON_NOISE = (r'"(?:role|type|tool_call_id)"\s*:\s*"[^"]*"|"[A-Za-z_][A-Za-z0-9_]*"\s*:'
               r"|\\(?:u[0-9a-fA-F]{4}|.)")
_NON_WORD = r"[^\pL\pN_]+"


def _normalise_distinct(texts: pa.Array) -> pa.Array:
    is_json = pc.fill_null(pc.match_substring_regex(texts, _JSON_LIKE), False)
    n_json = pc.sum(is_json).as_py() or 0
    if n_json == len(texts):
        texts = pc.replace_substring_regex(texts, _JSON_NOISE, " ")
    elif n_json:  # the JSON cells alone go through the JSON-noise pass
        stripped = pc.replace_substring_regex(texts.filter(is_json), _JSON_NOISE, " ")
        texts = pc.replace_with_mask(texts, is_json, stripped)
    return pc.utf8_trim(pc.replace_substring_regex(pc.utf8_lower(texts), _NON_WORD, " "),
                        characters=" ")


def normalise(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each cell as lower-case words joined by single spaces (null stays null). Each
    distinct cell is normalised once (prompts repeat across records)."""
    texts = _one_array(texts)
    if len(texts) == 0:
        return pa.array([], pa.string())
    encoded = pc.dictionary_encode(texts)
    return _normalise_split(encoded.dictionary).take(encoded.indices)


def _normalise_split(texts: pa.Array) -> pa.Array:
    """:func:`_normalise_distinct` with many texts split over a thread per core: Arrow's
    regex kernels release the interpreter lock (1.6x on 2 cores, measured). The threads end
    with the call, so a JSONL read that starts later can still fork its workers."""
    n, cores = len(texts), os.cpu_count() or 1
    if n < _SPLIT_MIN or cores < 2:
        return _normalise_distinct(texts)
    from concurrent.futures import ThreadPoolExecutor

    step = -(-n // cores)
    with ThreadPoolExecutor(cores) as pool:
        parts = pool.map(_normalise_distinct, [texts.slice(i, step) for i in range(0, n, step)])
        return pa.concat_arrays(list(parts))


_SPLIT_MIN = 20_000  # distinct texts below which one thread is faster than starting more


def _message_texts(value: str) -> list[str]:
    """The normalised text of each message of a chat prompt (or the whole prompt)."""
    parts: list[object] = [value]
    if value.lstrip()[:1] in ("[", "{"):
        try:
            parts = _strings(json.loads(value))
        except ValueError:
            pass
    texts = [p for p in parts if isinstance(p, str)]
    return [t for t in normalise(pa.array(texts, pa.string())).to_pylist() if t]


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


def _ngrams(words: list[str], n: int) -> set[str]:
    if len(words) < n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def _similarity(out: str | None, src: str | None, prompt: str | None, ngram: int, probe: int,
                min_words: int) -> float:
    """:func:`echo_similarity` on already normalised text (``prompt`` is the raw cell, read
    only for short outputs)."""
    if not out or not src:
        return 0.0
    if out == src:
        return 1.0
    if out.count(" ") + 1 < min_words:
        return 1.0 if prompt is not None and out in _message_texts(prompt) else 0.0
    padded = f" {src} "
    if f" {out} " in padded:
        return 1.0
    if len(out) > probe:
        mid = len(out) // 2
        probes = (out[:probe], out[mid - probe // 2: mid + probe // 2], out[-probe:])
        if not any(p in src for p in probes):
            return 0.0
    # the output's n-grams are few; searching each in the prompt text is cheaper than
    # building the prompt's n-gram set, which may be long
    grams = _ngrams(out.split(), ngram)
    return sum(f" {g} " in padded for g in grams) / len(grams) if grams else 0.0


def echo_similarities(outputs: pa.Array | pa.ChunkedArray,
                      prompts: list[pa.Array | pa.ChunkedArray], ngram: int = 3,
                      probe: int = 30, min_words: int = 3) -> list[float | None]:
    """:func:`echo_similarity` of each output against each prompt column (the highest
    wins); null for a null output. Each distinct output and prompt is normalised once,
    vectorised, and each distinct (output, prompt) pair compared once: the containment tests
    run per pair, not per row (a model's answer to a prompt it saw before costs nothing)."""
    outputs = _one_array(outputs)
    n = len(outputs)
    out_enc = pc.dictionary_encode(outputs)
    outs = normalise(out_enc.dictionary).to_pylist()
    out_idx = out_enc.indices.to_numpy(zero_copy_only=False)  # float, NaN for a null output
    best = np.where(np.isnan(out_idx), np.nan, 0.0) if n else np.zeros(0)
    for prompt in prompts:
        enc = pc.dictionary_encode(_one_array(prompt))
        raws = enc.dictionary.to_pylist()
        srcs = normalise(enc.dictionary).to_pylist()
        src_idx = enc.indices.to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(~np.isnan(out_idx) & ~np.isnan(src_idx))
        pairs, inverse = np.unique(out_idx[rows].astype(np.int64) * len(raws)
                                   + src_idx[rows].astype(np.int64), return_inverse=True)
        values = np.array([_similarity(outs[o], srcs[s], raws[s], ngram, probe, min_words)
                           for o, s in zip(*np.divmod(pairs, len(raws)), strict=True)],
                          dtype=float)
        if len(rows):
            best[rows] = np.maximum(best[rows], values[inverse])
    return [None if np.isnan(v) else float(v) for v in best]


def _one_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    return texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts


def echo_similarity(output: str, prompt: str, ngram: int = 3, probe: int = 30,
                    min_words: int = 3) -> float:
    """Share of the output's word n-grams that also occur in the prompt (1.0: every part of
    the output is copied from the prompt). Both sides are normalised to lower-case words;
    JSON cells (chat messages, structured answers) contribute their text, not their keys.
    An output of fewer than ``min_words`` words ("yes", a label the prompt lists) scores 1.0
    only when it is the whole prompt or one whole message of it, else 0. Three probes
    (start, middle, end of the output) gate the full comparison: when none of them occurs
    in the prompt, the output copies no long span of it and scores 0."""
    value = echo_similarities(pa.array([output], pa.string()), [pa.array([prompt], pa.string())],
                              ngram, probe, min_words)[0]
    return value or 0.0


class PromptEchoJudge:
    """value: echo similarity in [0, 1]; ``passed`` is false (label ``echo``) at or above the
    threshold."""

    Config = PromptEchoConfig

    def __init__(self, name: str, config: PromptEchoConfig, ctx: object) -> None:
        self.config = config

    def judge(self, batch: pa.Table) -> pa.Table:
        """One judgment per record; a null output is an error judgment (nothing to compare)."""
        cfg = self.config
        values = echo_similarities(batch.column("output"),
                                   [batch.column(c) for c in cfg.against], cfg.ngram,
                                   cfg.probe_chars, cfg.min_words)
        passed = [None if v is None else v < cfg.threshold for v in values]
        return verdicts(batch.column("record_id"), passed, value=values,
                        labels=[None if p is None else "no_echo" if p else "echo"
                                for p in passed],
                        status=["error" if v is None else "ok" for v in values],
                        error=[None if v is not None else "output is null: nothing to compare"
                               for v in values])
