"""Echo similarity for whole columns: the values of
:func:`evalkit.analysis.echo.echo_similarity` (the definition, one pair at a time, which the
tests compare this module against), computed for a batch at a fraction of the cost. How:

- each distinct output and prompt is normalised once, vectorised with Arrow; ASCII text
  takes a byte table instead of a regex match per word gap, and many texts are split over a
  thread per core;
- each distinct (output, prompt) pair is compared once, in prompt order (the texts compared
  one after the other sit near each other in memory);
- a short output's n-grams are searched as substrings of the prompt, a long one's as a set
  intersection, whichever costs less (same value)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit._arrow import one_array
from evalkit.analysis.echo import JSON_LIKE, JSON_NOISE, json_strings

__all__ = ["echo_similarities", "echo_values", "normalise"]


# cells with other characters than ASCII: their non-ASCII non-word characters (NON_WORD
# without ASCII), so that text that is mostly ASCII has one match per rare character (a dash,
# a non-breaking space, an emoji) instead of one per gap between words
_NON_ASCII_NON_WORD = r"[^\pL\pN_\x00-\x7f]+"


def _normalise_distinct(texts: pa.Array) -> pa.Array:
    # the JSON cells alone go through the JSON-noise pass
    is_json = pc.fill_null(pc.match_substring_regex(texts, JSON_LIKE), False)
    texts = _where(is_json, texts, texts,
                   lambda cells: pc.replace_substring_regex(cells, JSON_NOISE, " "))
    # cells with other characters than ASCII are lower-cased first (Unicode-aware) and their
    # non-ASCII non-word characters become spaces; the byte table then does the ASCII rest
    other = pc.invert(pc.fill_null(pc.string_is_ascii(texts), True))
    return _where(other, _ascii_words(texts), texts, lambda cells: _ascii_words(
        pc.replace_substring_regex(pc.utf8_lower(cells), _NON_ASCII_NON_WORD, " ")))


def _where(mask: pa.Array, base: pa.Array, source: pa.Array,
           change: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``base`` with the cells under ``mask`` replaced by ``change`` of those cells of
    ``source`` (no filtering when the mask takes all or none)."""
    n = pc.sum(mask).as_py() or 0
    if n == 0:
        return base
    if n == len(mask):
        return change(source)
    return pc.replace_with_mask(base, mask, change(source.filter(mask)))


# The same words for ASCII text, without a regex match per word gap (the cost of the regex
# path): one table lookup over the whole data buffer lower-cases word characters and turns
# every other byte into a space, then numpy drops each space that follows a space and Arrow
# trims the ends. Bytes of non-ASCII cells pass through and those cells are redone above.
_ASCII_WORDS = bytes(c if c > 127 else ord(chr(c).lower()) if chr(c).isalnum() or c == 95
                     else 32 for c in range(256))


def _ascii_words(texts: pa.Array) -> pa.Array:
    large = pa.types.is_large_string(texts.type)
    validity, offsets, data = texts.buffers()
    ends = np.frombuffer(offsets, np.int64 if large else np.int32)
    ends = ends[texts.offset: texts.offset + len(texts) + 1]
    lo = int(ends[0]) if len(ends) else 0
    hi = int(ends[-1]) if len(ends) else 0
    mapped = np.frombuffer(bytes(memoryview(data or b"")[lo:hi]).translate(_ASCII_WORDS),
                           np.uint8)
    space = mapped == 32
    space[1:] &= space[:-1]  # a space after a space goes (the first of a run stays)
    gone = np.flatnonzero(space)
    starts = (ends - lo) - np.searchsorted(gone, ends - lo)  # bytes gone before each cell
    words = pa.Array.from_buffers(
        texts.type, len(texts),
        [pc.is_valid(texts).buffers()[1] if texts.null_count else None,
         pa.py_buffer(starts.astype(ends.dtype)), pa.py_buffer(mapped[~space])],
        texts.null_count)
    return pc.utf8_trim(words, characters=" ")


def normalise(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each cell as lower-case words joined by single spaces (null stays null). Each
    distinct cell is normalised once (prompts repeat across records)."""
    texts = one_array(texts)
    if len(texts) == 0:
        return pa.array([], pa.string())
    encoded = pc.dictionary_encode(texts)
    return _normalise_split(encoded.dictionary).take(encoded.indices)


def _normalise_split(texts: pa.Array) -> pa.Array:
    """:func:`_normalise_distinct` with many texts split over a thread per core: Arrow's
    kernels and numpy release the interpreter lock for most of the work (1.8-2x on 2 cores
    alone, measured on 1M texts). The threads end with the call, so a JSONL read that starts
    later can still fork its workers."""
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
            parts = json_strings(json.loads(value))
        except ValueError:
            pass
    texts = [p for p in parts if isinstance(p, str)]
    return [t for t in normalise(pa.array(texts, pa.string())).to_pylist() if t]


def _similarity(out: str | None, src: str | None, raws: pa.Array, at: int, ngram: int,
                probe: int, min_words: int) -> float:
    """:func:`evalkit.analysis.echo.echo_similarity` on already normalised text
    (``raws[at]`` is the raw prompt cell, read only for short outputs)."""
    if not out or not src:
        return 0.0
    if out == src:
        return 1.0
    if out.count(" ") + 1 < min_words:
        prompt = raws[at].as_py()
        return 1.0 if prompt is not None and out in _message_texts(prompt) else 0.0
    if len(out) > probe:  # (an output inside the prompt has its probes there too)
        mid = len(out) // 2
        if not (out[:probe] in src or out[mid - probe // 2: mid + probe // 2] in src
                or out[-probe:] in src):
            return 0.0
    if f" {out} " in f" {src} ":
        return 1.0
    # " w1 w2 w3 " occurs in " src " exactly when w1 w2 w3 are consecutive words of src
    # (both are words joined by single spaces): the share is a substring search per n-gram
    # of a short output, and a set intersection of n-grams for a longer one, where building
    # the prompt's n-grams once costs less than searching the prompt for each (same value)
    words = out.split(" ")
    if len(words) < ngram:
        return 0.0  # the whole output, under ngram words, is not in the prompt (tested above)
    if len(words) <= _FEW_WORDS:
        padded = f" {src} "
        texts = {f" {' '.join(words[k:k + ngram])} " for k in range(len(words) - ngram + 1)}
        hits = 0
        for text in texts:
            if text in padded:
                hits += 1
        return hits / len(texts)
    grams = set(_grams(words, ngram))
    return len(grams.intersection(_grams(src.split(" "), ngram))) / len(grams)


# outputs of up to this many words take the substring searches (measured: with 10 n-grams
# they cost 2-4x less than the set for prompts of 30 to 3,000 words; at 30 n-grams the two
# are even, and above, the set wins by up to 15x)
_FEW_WORDS = 20


def _grams(words: list[str], n: int) -> Iterator[tuple[str, ...]]:
    """The n-grams of ``words`` as tuples (the shortest slice ends the zip)."""
    return zip(*(words[k:] for k in range(n)), strict=False)


def echo_similarities(outputs: pa.Array | pa.ChunkedArray,
                      prompts: list[pa.Array | pa.ChunkedArray], ngram: int = 3,
                      probe: int = 30, min_words: int = 3) -> list[float | None]:
    """:func:`evalkit.analysis.echo.echo_similarity` of each output against each prompt
    column (the highest wins); null for a null output. Each distinct output and prompt is
    normalised once, vectorised, and each distinct (output, prompt) pair compared once: the
    containment tests run per pair, not per row (a model's answer to a prompt it saw before
    costs nothing)."""
    values = echo_values(outputs, prompts, ngram, probe, min_words)
    return pa.array(values, pa.float64(), mask=np.isnan(values)).to_pylist()


def echo_values(outputs: pa.Array | pa.ChunkedArray, prompts: list[pa.Array | pa.ChunkedArray],
                ngram: int = 3, probe: int = 30, min_words: int = 3) -> np.ndarray:
    """:func:`echo_similarities` as a float array, NaN for a null output."""
    outputs = one_array(outputs)
    n = len(outputs)
    out_cells, out_idx = _cells(outputs)  # out_idx: float, NaN for a null output
    outs = _normalise_split(out_cells).to_pylist()
    best = np.where(np.isnan(out_idx), np.nan, 0.0) if n else np.zeros(0)
    for prompt in prompts:
        raws, src_idx = _cells(one_array(prompt))  # (raw cells: read for short outputs)
        srcs = _normalise_split(raws).to_pylist()
        rows = np.flatnonzero(~np.isnan(out_idx) & ~np.isnan(src_idx))
        # pairs in prompt order, which is about row order: the texts compared one after the
        # other sit near each other in memory (in output order, a reply that recurs all over
        # the file, like a refusal, would fetch prompts from everywhere)
        pairs, inverse = np.unique(src_idx[rows].astype(np.int64) * len(outs)
                                   + out_idx[rows].astype(np.int64), return_inverse=True)
        s_of, o_of = np.divmod(pairs, len(outs))
        values = np.array([_similarity(outs[o], srcs[s], raws, s, ngram, probe, min_words)
                           for o, s in zip(o_of.tolist(), s_of.tolist(), strict=True)],
                          dtype=float)
        if len(rows):
            best[rows] = np.maximum(best[rows], values[inverse])
    return best


def _cells(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The distinct cells of ``texts`` and, for each row, the index of its cell as a float
    (NaN for a null). Hashing finds the repeats; when a sample of the rows has (almost) none,
    as chat prompts that each carry their own question, every row is taken as its own cell
    and the hashing is skipped. Either way the values are the same: cells are deduplicated
    only to normalise and compare each once."""
    sample = texts.slice(0, _SAMPLE)
    valid = len(sample) - sample.null_count
    if valid >= _SAMPLE // 2 and pc.count_distinct(sample).as_py() >= 0.95 * valid:
        idx = np.arange(len(texts), dtype=float)
        if texts.null_count:
            idx[np.asarray(texts.is_null().to_numpy(zero_copy_only=False), bool)] = np.nan
        return texts, idx
    enc = pc.dictionary_encode(texts)
    return enc.dictionary, enc.indices.to_numpy(zero_copy_only=False)


_SAMPLE = 2048  # rows whose distinct count decides whether a column's repeats are sought
