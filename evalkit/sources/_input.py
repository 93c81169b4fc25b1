"""Opening a source file as a stream of bytes, whatever it was saved as.

:func:`open_input` looks at a file's first bytes, not its name: gzip data is decompressed
(a plain file named ``.gz`` is read as it is), a UTF-8 byte-order mark is skipped, and a file
that evalkit cannot read as UTF-8 text (UTF-16 or UTF-32, another compression) is refused with
one line naming the file and the fix. Damage found later (a truncated gzip file, a bad
checksum) does not raise: the stream ends where the damage is and :class:`Input` says what
happened, so the reader keeps the lines before it and rejects the rest.

:func:`bounded_line` reads the rest of a line without holding more than the line limit."""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import SourceError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
# first bytes of what a UTF-8 reader cannot read, with the fix
REFUSED = [
    (b"\x00\x00\xfe\xff", "is UTF-32 text (it starts with a byte-order mark); save it as UTF-8"),
    (b"\xff\xfe\x00\x00", "is UTF-32 text (it starts with a byte-order mark); save it as UTF-8"),
    (b"\xff\xfe", "is UTF-16 text (it starts with a byte-order mark); save it as UTF-8 "
                  "(a spreadsheet's \"CSV UTF-8\", or iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", "is UTF-16 text (it starts with a byte-order mark); save it as UTF-8 "
                  "(a spreadsheet's \"CSV UTF-8\", or iconv -f UTF-16 -t UTF-8)"),
    (b"BZh", "is bzip2-compressed, which evalkit does not read; decompress it (bunzip2) or "
             "compress it with gzip"),
    (b"\xfd7zXZ\x00", "is xz-compressed, which evalkit does not read; decompress it (unxz) "
                      "or compress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "is zstd-compressed, which evalkit does not read; decompress it "
                          "(unzstd) or compress it with gzip"),
    (b"PK\x03\x04", "is a zip archive, which evalkit does not read; extract it (unzip) or "
                    "compress the file with gzip"),
]
# compressed bytes read from a gzip file at a time, and most bytes one of them may inflate to
# (a small file that inflates to gigabytes is read a piece at a time like any other)
GZ_READ = 1 << 16
GZ_OUT = 1 << 20


class _Gunzip(io.RawIOBase):
    """The decompressed bytes of a gzip file (every member of a concatenated one), as a raw
    stream that never raises on damage: a file cut short, a bad checksum or bytes that are not
    gzip end the stream there, with the reason in ``fault``. The framing is read here and the
    deflate data by zlib, so every byte before the damage is delivered (zlib's own gzip mode
    drops the output of the call that meets a bad checksum: a small file's every line)."""

    def __init__(self, raw: io.BufferedReader) -> None:
        self.raw = raw
        self.inflate: Any = None  # the member's raw deflate stream, once its header is read
        self.crc = self.size = 0
        self.out = memoryview(b"")
        self.done = False
        self.fault: str | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.out and not self.done:
            self.out = memoryview(self._inflate())
        n = min(len(buffer), len(self.out))
        buffer[:n] = self.out[:n]
        self.out = self.out[n:]
        return n

    def _inflate(self) -> bytes:
        inflate = self.inflate
        if inflate is None:
            return self._header()
        if inflate.eof:
            return self._trailer()
        data = inflate.unconsumed_tail or self.raw.read(GZ_READ)
        if not data:
            self._stop("the gzip data ends early (the file was cut short)")
            return inflate.flush()
        try:
            out = inflate.decompress(data, GZ_OUT)
        except zlib.error as exc:
            self._stop(f"the gzip data is damaged ({str(exc).split(': ', 1)[-1]})")
            return b""
        self.crc, self.size = zlib.crc32(out, self.crc), self.size + len(out)
        return out

    def _header(self) -> bytes:
        """Read a member's header (or the end of the file, after zero padding); no bytes."""
        raw = self.raw
        while True:  # zero padding after a member is allowed (as gzip and GNU gzip allow it)
            ahead = raw.peek(1)
            zeros = len(ahead) - len(ahead.lstrip(b"\0"))
            if not zeros:
                break
            raw.read(zeros)
        head = raw.read(10)
        if not head:
            self.done = True
            return b""
        if len(head) < 10 or head[:3] != b"\x1f\x8b\x08":
            self._stop("bytes that are not gzip follow the gzip data"
                       if head[:2] != GZIP_MAGIC else
                       "the gzip data is damaged (a member's header is cut short)")
            return b""
        flags = head[3]
        if flags & 4:  # FEXTRA: a length, then that many bytes
            extra = raw.read(2)
            raw.read(int.from_bytes(extra, "little") if len(extra) == 2 else 0)
        for flag in (8, 16):  # FNAME, FCOMMENT: zero-terminated
            if flags & flag:
                while (byte := raw.read(1)) and byte != b"\0":
                    pass
        if flags & 2:  # FHCRC
            raw.read(2)
        self.inflate, self.crc, self.size = zlib.decompressobj(-zlib.MAX_WBITS), 0, 0
        return b""

    def _trailer(self) -> bytes:
        """Check a member's trailer (CRC-32 and length of its data); no bytes."""
        trailer = self.inflate.unused_data
        if len(trailer) < 8:
            trailer += self.raw.read(8 - len(trailer))
        if len(trailer) < 8:
            self._stop("the gzip data ends early (the file was cut short)")
        elif int.from_bytes(trailer[:4], "little") != self.crc or \
                int.from_bytes(trailer[4:8], "little") != self.size & 0xFFFFFFFF:
            self._stop("the gzip data is damaged (its checksum does not match what it holds)")
        else:  # bytes read past the trailer belong to what follows it
            raw = self.raw.stream if isinstance(self.raw, _Prefixed) and not self.raw.first \
                else self.raw
            self.raw = _Prefixed(trailer[8:], raw) if len(trailer) > 8 else raw
            self.inflate = None
        return b""

    def _stop(self, fault: str) -> None:
        self.done, self.fault = True, fault


class _Prefixed:
    """Bytes already read, then the rest of a stream (``read`` and ``peek`` only)."""

    def __init__(self, first: bytes, stream: Any) -> None:
        self.first, self.stream = first, stream

    def read(self, n: int) -> bytes:
        if not self.first:
            return self.stream.read(n)
        out, self.first = self.first[:n], self.first[n:]
        return out + (self.stream.read(n - len(out)) if len(out) < n else b"")

    def peek(self, n: int) -> bytes:
        return self.first or self.stream.peek(n)


@dataclass
class Input:
    """An open source file: ``stream`` gives its bytes (decompressed), from ``start`` (the
    byte after a byte-order mark; -1 in a gzip file, whose offsets are not the file's)."""

    path: Path
    stream: io.BufferedReader
    gz: bool
    start: int
    _gunzip: _Gunzip | None = None

    @property
    def fault(self) -> str | None:
        """Why the stream ended before the file's end (damaged gzip data), else ``None``."""
        return self._gunzip.fault if self._gunzip is not None else None

    def fault_message(self) -> str:
        return (f"{self.fault}: this line and any after it are lost; copy or compress the "
                "file again")


def _refused(path: Path, head: bytes) -> None:
    for magic, why in REFUSED:
        if head.startswith(magic):
            raise SourceError(f"{path} {why}")


@contextmanager
def open_input(path: Path) -> Iterator[Input]:
    """``path`` opened for reading its lines (see the module's docstring). Raises
    :class:`SourceError` for a file that cannot be opened or read as UTF-8 text."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed below)
    except IsADirectoryError:
        raise SourceError(f"source.path: {path} is a directory; point at the files in it "
                          f"({path}/*)") from None
    except OSError as exc:
        raise SourceError(f"source.path: cannot open {path} ({exc.strerror}); fix the path "
                          "or its permissions") from None
    with raw:
        head = raw.peek(8)[:8]
        gunzip = None
        stream = raw
        if head.startswith(GZIP_MAGIC):
            gunzip = _Gunzip(raw)
            stream = io.BufferedReader(gunzip, GZ_OUT)
            head = stream.peek(8)[:8]
        _refused(path, head)
        start = 0
        if head.startswith(UTF8_BOM):
            stream.read(len(UTF8_BOM))
            start = len(UTF8_BOM)
        yield Input(path, stream, gunzip is not None, -1 if gunzip else start, gunzip)


def check_input(path: Path) -> None:
    """Raise :class:`SourceError` now for a file :func:`open_input` would refuse, so a run
    stops before it reads anything rather than at its tenth file."""
    with open_input(path):
        pass


def bounded_line(stream: io.BufferedReader, have: int, limit: int) -> tuple[bytes, int, int]:
    """The rest of a line of which ``have`` bytes were read already, when the whole line (its
    newline aside) holds at most ``limit`` bytes; else ``b""`` after skipping to the line's end
    a MiB at a time, never holding the line. Returns the bytes (for a skipped line: its first
    ``HEAD`` bytes read here, for its reject), the line's length (without its newline: over
    ``limit`` when it was skipped) and the bytes this call read."""
    rest = stream.readline(limit + 1 - have)
    if rest.endswith(b"\n") or len(rest) < limit + 1 - have:
        return rest, have + len(rest) - rest.endswith(b"\n"), len(rest)
    head, read = rest[:HEAD], len(rest)
    del rest
    while True:
        more = stream.readline(1 << 20)
        read += len(more)
        if more.endswith(b"\n") or not more:
            return head, have + read - more.endswith(b"\n"), read


# bytes of a line kept for its reject when the line itself is not
HEAD = 1000


def head_text(data: bytes) -> str:
    """The start of a line that is not read whole, as the raw text of its reject."""
    return data[:HEAD].decode("utf-8", "backslashreplace") + "…"


def decode_problem(line: bytes, exc: Exception) -> str:
    """Why a line that orjson could not parse is rejected: bytes that are not UTF-8, or bad
    JSON."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return (f"not UTF-8 ({bad.reason} at byte {bad.start}); re-encode the file as UTF-8")
    return f"malformed JSON: {exc}"
