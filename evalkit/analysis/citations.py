"""Citations in an output (``[2]``, ``[1, 3]``) and the sentence each is attached to.
Shared by the ``citation_precision`` metric and the ``citation_support`` judge, which must
find the same citations."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Citation", "check_citation_settings", "extract_citations"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Citation:
    """One citation: the cited passage id and the sentence (claim) it is attached to."""

    id: str
    claim: str


def extract_citations(output: str, pattern: str = r"\[([^\]]+)\]") -> list[Citation]:
    """The citations of ``output`` in order: each match of ``pattern`` (group 1 holds one id,
    or several separated by commas or semicolons, as in ``[1, 3]``) with its sentence."""
    regex = re.compile(pattern)
    found: list[Citation] = []
    for sentence in _SENTENCE_END.split(output or ""):
        for match in regex.finditer(sentence):
            claim = regex.sub("", sentence).strip()
            for cid in re.split(r"[,;]", match.group(1)):
                if cid.strip():
                    found.append(Citation(cid.strip(), claim))
    return found


def check_citation_settings(pattern: str, ids: str) -> None:
    """For a Config's ``validate``: the citation regex and id scheme (shared with the
    ``citation_support`` judge, which must find the same citations)."""
    try:
        if re.compile(pattern).groups < 1:
            raise ValueError(f"pattern: {pattern!r} needs a group capturing the id")
    except re.error as exc:
        raise ValueError(f"pattern: not a valid regex ({exc})") from None
    if ids != "position" and not ids.startswith("metadata."):
        raise ValueError(f"ids: {ids!r} is neither position nor metadata.<path> (a "
                         "list of passage ids aligned with context)")
