"""Echo similarity: how much of an output copies its prompt (failure mode A of the audit:
small models returning their input verbatim). Shared by the ``prompt_echo`` and
``failure_mode`` judges.

This module is the definition, written plainly, one text at a time: the reference that
:mod:`evalkit.analysis.echo_fast` (what the judges run: the same values for whole columns,
each distinct text normalised once) is tested against."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["echo_similarity", "json_strings", "message_texts", "normalise_text"]

# Both sides are compared as lower-case words (letters, digits, "_") joined by single spaces.
# A cell holding JSON (chat messages, a structured answer) loses its structure first:
# role/type values and object keys go, JSON escapes become spaces, so what remains is the
# text the model read or wrote. The patterns are RE2 (Arrow's regex engine).
JSON_LIKE = r"^\s*[\[{]"
# one pass: role/type values, object keys, escapes (\n, \", \u00e9)
JSON_NOISE = (r'"(?:role|type|tool_call_id)"\s*:\s*"[^"]*"|"[A-Za-z_][A-Za-z0-9_]*"\s*:'
              r"|\\(?:u[0-9a-fA-F]{4}|.)")
NON_WORD = r"[^\pL\pN_]+"


def normalise_text(text: str | None) -> str | None:
    """``text`` as lower-case words joined by single spaces (``None`` stays ``None``)."""
    if text is None:
        return None
    cell = pa.array([text], pa.string())
    if pc.match_substring_regex(cell, JSON_LIKE)[0].as_py():
        cell = pc.replace_substring_regex(cell, JSON_NOISE, " ")
    words = pc.replace_substring_regex(pc.utf8_lower(cell), NON_WORD, " ")
    return pc.utf8_trim(words, characters=" ")[0].as_py()


def message_texts(prompt: str) -> list[str]:
    """The normalised text of each message of a chat prompt (JSON), or of the whole prompt;
    empty texts left out."""
    parts: list[object] = [prompt]
    if prompt.lstrip()[:1] in ("[", "{"):
        try:
            parts = json_strings(json.loads(prompt))
        except ValueError:
            pass
    texts = [normalise_text(p) for p in parts if isinstance(p, str)]
    return [t for t in texts if t]


def json_strings(obj: object) -> list[str]:
    """The strings of parsed JSON, a chat message's content only."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        if "content" in obj:  # a chat message: its content only
            return json_strings(obj["content"])
        return [s for v in obj.values() for s in json_strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in json_strings(v)]
    return []


def echo_similarity(output: str | None, prompt: str | None, ngram: int = 3, probe: int = 30,
                    min_words: int = 3) -> float:
    """Share of the output's word n-grams that also occur in the prompt (1.0: every part of
    the output is copied from the prompt), both normalised (:func:`normalise_text`).

    - an empty output or prompt scores 0; an output equal to the prompt, or contained in it
      whole, scores 1;
    - an output of fewer than ``min_words`` words ("yes", a label the prompt lists) scores
      1.0 only when it is the whole prompt or one whole message of it, else 0;
    - three probes of ``probe`` characters (start, middle, end of the output) gate the
      n-gram comparison: when none of them occurs in the prompt, the output copies no long
      span of it and scores 0;
    - an output of fewer than ``ngram`` words that is not in the prompt scores 0."""
    out, src = normalise_text(output), normalise_text(prompt)
    if not out or not src:
        return 0.0
    if out == src:
        return 1.0
    words = out.split(" ")
    if len(words) < min_words:
        return 1.0 if out in message_texts(prompt or "") else 0.0
    if len(out) > probe:
        mid = len(out) // 2
        probes = (out[:probe], out[mid - probe // 2: mid + probe // 2], out[-probe:])
        if not any(p in src for p in probes):
            return 0.0
    if f" {out} " in f" {src} ":
        return 1.0
    if len(words) < ngram:
        return 0.0
    grams = {tuple(words[k:k + ngram]) for k in range(len(words) - ngram + 1)}
    source = src.split(" ")
    copied = {tuple(source[k:k + ngram]) for k in range(len(source) - ngram + 1)}
    return len(grams & copied) / len(grams)
