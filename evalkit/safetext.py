"""Text from data (record ids, model names, alert messages, metric and judge names, values
read back from a runs directory), made safe for where evalkit shows or writes it. Data is
never interpreted by whatever shows it:

- :func:`visible`: for a terminal. Control characters (C0 but tab and, where kept, the line
  feed; DEL; C1), bidirectional overrides and isolates, lone surrogates and the two
  non-characters XML refuses are shown as Python-style escapes (``\\x1b``, ``\\u202e``): an
  escape sequence cannot move the cursor, clear the screen, hide a link or reorder a line,
  and nothing vanishes.
- :func:`markup`: for rich: :func:`visible`, then rich's markup escaped (``[/]``,
  ``[model=x]``, ``[link=...]`` print as written, never as styles or a MarkupError).
- :func:`xml_text`: for XML (JUnit): :func:`visible` keeping line feeds, so every character
  left is one XML 1.0 allows (ElementTree escapes ``<``, ``>`` and ``&``).
- :func:`markdown_text`: for Markdown a pull request shows: no link, image, HTML, mention
  (``@user``, ``@org/team``, ``@everyone``) or issue reference (``#123``) comes from data.
- :func:`csv_cell`: for spreadsheets: a text cell starting with ``=``, ``+``, ``-``, ``@``, a
  tab or a carriage return gets a leading ``'`` (OWASP's CSV injection advice), unless it is
  a plain number.

docs/trust.md states the rule and the tests that hold it."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["csv_cell", "json_visible", "markdown_text", "markup", "visible", "xml_text"]

# C0 (tab and line feed handled apart), DEL, C1; bidi marks, embeddings, overrides and
# isolates; lone surrogates; U+FFFE and U+FFFF (not characters, refused by XML)
_UNSAFE = (r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
           r"\ud800-\udfff\ufffe\uffff")
_UNSAFE_LINE = re.compile(f"[{_UNSAFE}\\n]")
_UNSAFE_BLOCK = re.compile(f"[{_UNSAFE}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: Any, *, newlines: bool = False) -> str:
    """``text`` with every character a terminal could act on shown as an escape; line feeds
    too unless ``newlines`` (then the text may span lines, but each line is inert)."""
    s = text if isinstance(text, str) else str(text)
    return (_UNSAFE_BLOCK if newlines else _UNSAFE_LINE).sub(_escape, s)


# what rich reads as a tag (rich.markup.RE_TAGS), with the backslashes before it; an
# unclosed one at the end, which a "]" after the text would close; backslashes before any
# other "[" (rich's plain text turns each "\\[" into "[")
_RICH_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?]|\[[a-z#/@][^[\]]*$)|(\\+)(?=\[)")
_EMPTY_TAG = "[b][/b]"  # no text, no style: keeps what is before it apart from what follows


def _escape_rich(match: re.Match[str]) -> str:
    if match.group(3) is not None:  # "\\[" not a tag: rich drops one backslash, add one
        return match.group(3) + "\\"
    backslashes, tag = match.group(1), match.group(2)
    if backslashes and not tag.endswith("]"):
        # unclosed at the end: a tag if a "]" follows, plain text if not, and rich reads the
        # backslashes differently in each; an empty tag between keeps them apart
        return backslashes * 2 + _EMPTY_TAG + "\\" + tag
    return backslashes * 2 + "\\" + tag  # a tag: its backslashes doubled, then escaped


def markup(text: Any, *, newlines: bool = False) -> str:
    """``text`` to put inside a rich markup string: :func:`visible`, every tag-like ``[...]``
    escaped (the backslashes before one doubled), a backslash added before any other ``[``
    that follows backslashes, and backslashes at the end closed off by an empty tag. It
    prints as :func:`visible` shows it whatever follows it (the end, a space, a tag, ``[``
    or ``]``; ``rich.markup.escape``'s output shows a trailing backslash doubled unless a
    tag follows); only never follow it with letters that could finish a tag it opens
    (``[`` + ``bold]``)."""
    shown = visible(text, newlines=newlines)
    body = shown.rstrip("\\")
    # backslashes at the end would escape a tag after the text: literal ones, then a tag
    end = "\\" * 2 * (len(shown) - len(body)) + _EMPTY_TAG if len(body) < len(shown) else ""
    return _RICH_TAG.sub(_escape_rich, body) + end


def xml_text(text: Any) -> str:
    """``text`` for an XML element or attribute: only characters XML 1.0 allows, controls
    shown as escapes."""
    return visible(text, newlines=True)


def json_visible(json_text: str) -> str:
    """A JSON document with every character :func:`visible` escapes written as a ``\\u``
    escape: the same JSON value, inert on a terminal."""
    return _UNSAFE_BLOCK.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


# what makes a link or an image (brackets), a code span, a table cell's end, or undoes these
# escapes; emphasis (* _ ~) only styles text and is left as it is
_MD_PUNCT = re.compile(r"([\\`\[\]|])")
_MD_MENTION = re.compile(r"([@#!])(?=[\w-])")  # @user, @org/team, #123, GitLab's !123
_MD_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto|www)([:.])")


def markdown_text(text: Any) -> str:
    """``text`` for a line or table cell of Markdown shown by a code host: visible, one line,
    HTML and entities inert, brackets, backticks and pipes backslash-escaped, no bare URL
    autolinked and no mention or issue reference made (a word joiner, U+2060, follows the
    ``@`` or ``#``)."""
    s = visible("" if text is None else text)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_PUNCT.sub(r"\\\1", s)
    s = _MD_AUTOLINK.sub("\\1\u2060\\2", s)
    return _MD_MENTION.sub("\\1\u2060", s)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: text starting with one of
    :data:`FORMULA_PREFIXES` gets a leading ``'``, unless it is a plain number (``-1.5``).
    Other values are returned as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and \
            not _NUMBER.fullmatch(value):
        return "'" + value
    return value
