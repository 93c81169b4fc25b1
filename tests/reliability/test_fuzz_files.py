"""Property-based fuzzing of the file sources (hypothesis): JSONL lines of every kind, CSV
rows, gzip framing damaged every way. For every input: no exception escapes (a file that
cannot be read at all is one :class:`SourceError`); every line or row that does not become a
record is a reject with its ``file:line`` and a reason; records + rejects = what went in; and
the run's reader gives exactly what the plain reference reader gives."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import zlib
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import SourceError
from evalkit.sources._input import GZIP_MAGIC, REFUSED
from tests.reliability.fuzzing import COUNTS, fuzz
from tests.reliability.readers import Read, read_csv, read_jsonl, read_jsonl_plainly

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
# values for the keys the mapping reads: the right type, the wrong one, or anything
ID = st.one_of(st.text(max_size=4), st.integers(0, 5), st.none(), JSON)
RECORD = st.fixed_dictionaries(
    {"id": ID},
    optional={"output": JSON, "input": JSON, "model": st.sampled_from(["m", "n"]) | JSON,
              "latency_s": st.floats() | st.integers() | st.text(max_size=4),
              "timestamp": st.sampled_from(["2026-01-02T03:04:05Z", "yesterday", 1767323045,
                                            -1e300]),
              "usage": st.fixed_dictionaries({}, optional={"input": JSON, "output": JSON}) |
              JSON,
              "team": JSON, "tags": st.lists(st.text(max_size=3), max_size=2) | JSON})


def _json_line(obj: Any, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


LINE = st.one_of(
    st.tuples(RECORD, st.booleans()).map(lambda t: _json_line(*t)),  # (most lines)
    st.tuples(RECORD, st.booleans()).map(lambda t: _json_line(*t)),
    st.tuples(RECORD, st.booleans()).map(lambda t: _json_line(*t)),
    JSON.map(lambda v: json.dumps(v).encode()),  # JSON that is not an object
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),  # anything
    st.sampled_from([b"", b"   ", b"\t", b"\r", b"\x0c", b"{", b'{"id": "x"', b"\xff\xfe",
                     b'{"id": "\xff"}', b'{"id": "\\ud800"}', b"[1,2]", b"null",
                     b'{"id": 1e400}', b'{"id": 12345678901234567890123}']),
    st.integers(300, 900).map(lambda n: b'{"id": "long", "output": "' + b"z" * n + b'"}'),
)


def _lines_in(content: bytes, limit: int) -> int:
    """Lines that must each become a record or a reject: over the limit, or not blank."""
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return sum(1 for line in lines if len(line) > limit or line.strip())


def _check(read: Read, path: Path, lines: int | None, count: str) -> None:
    """Every reject names the file and a line in it (or the one after its end: damage found
    there), with a reason."""
    records, rejects, _ = read
    for reject in rejects:
        where, line = reject["location"].rsplit(":", 1)
        assert where == str(path) and 1 <= int(line), reject
        assert lines is None or int(line) <= lines + 1, reject
        assert reject["reason"], reject
    counts = COUNTS[count]
    counts["examples"] += 1
    counts["records"] += len(records)
    counts["rejects"] += len(rejects)


@fuzz(examples=150)
@given(lines=st.lists(LINE, max_size=25), crlf=st.booleans(), bom=st.booleans(),
       gz=st.booleans(), last_newline=st.booleans(), workers=st.sampled_from([0, 0, 0, 1]),
       options=st.fixed_dictionaries({
           "batch_size": st.integers(1, 8), "max_line_bytes": st.integers(20, 600)},
           optional={"record_id": st.just("id"), "required": st.just(["model"]),
                     "fields": st.just({"input_tokens": "usage.input",
                                        "output_tokens": "usage.output"}),
                     "scores": st.just({"team_score": "team"}),
                     "extra_to_metadata": st.booleans()}))
def test_fuzzed_jsonl_reads_as_the_plain_reader_with_every_line_accounted(
        tmp_path_factory, lines: list[bytes], crlf: bool, bom: bool, gz: bool,
        last_newline: bool, workers: int, options: dict[str, Any]) -> None:
    tmp = tmp_path_factory.mktemp("jsonl")
    end = b"\r\n" if crlf else b"\n"
    content = end.join(lines) + (end if last_newline and lines else b"")
    data = (b"\xef\xbb\xbf" if bom else b"") + content
    path = tmp / ("a.jsonl.gz" if gz else "a.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        read = read_jsonl(path, tmp, workers=workers, **options)
    except SourceError as exc:  # only a file that starts as UTF-16, bzip2...
        assert any(data.startswith(magic) for magic, _ in REFUSED), exc
        COUNTS["jsonl"]["refused"] += 1
        return
    assert read == read_jsonl_plainly(path, tmp, **options)
    n = content.count(b"\n") + (not content.endswith(b"\n"))
    records, rejects, _ = read
    if not data.startswith(GZIP_MAGIC):  # (else the bytes are read as damaged gzip)
        assert len(records) + len(rejects) == _lines_in(content, options["max_line_bytes"])
    _check(read, path, n, "jsonl")


def _damage(data: bytes, how: str, at: float, byte: int) -> bytes:
    i = min(len(data) - 1, int(at * len(data)))
    if how == "cut":
        return data[:max(1, i)]  # (an empty file is an empty file, whatever its name)
    if how == "flip":
        return data[:i] + bytes([data[i] ^ (byte or 1)]) + data[i + 1:]
    if how == "append":
        return data + bytes([byte]) * 3
    if how == "pad":
        return data + b"\0" * (byte % 7 + 1) + gzip.compress(b'{"id": "after"}\n')
    return data


@fuzz(examples=150)
@given(n=st.integers(0, 60), how=st.sampled_from(["cut", "flip", "append", "pad", "none"]),
       at=st.floats(0, 1), byte=st.integers(0, 255), level=st.integers(0, 9))
def test_fuzzed_gzip_framing_never_reads_damage_as_data(tmp_path_factory, n: int, how: str,
                                                        at: float, byte: int,
                                                        level: int) -> None:
    """A gzip file cut, flipped or with bytes after it: the lines before the damage are read,
    the damage is a reject, and a file that reads differently from what was compressed
    always says so."""
    tmp = tmp_path_factory.mktemp("gz")
    original = b"".join(b'{"id": "r%d", "output": "%s"}\n' % (i, b"w" * (i * 37 % 90))
                        for i in range(n))
    path = tmp / "a.jsonl.gz"
    path.write_bytes(_damage(gzip.compress(original, level), how, at, byte))
    try:
        read = read_jsonl(path, tmp, record_id="id", workers=0, batch_size=16)
    except Exception as exc:  # only a file that is no longer gzip, and looks like another
        assert type(exc).__name__ == "SourceError" and str(path) in str(exc)
        COUNTS["gzip"]["refused"] += 1
        return
    assert read == read_jsonl_plainly(path, tmp, record_id="id", batch_size=16)
    records, rejects, _ = read
    ids = [r["record_id"] for r in records]
    expected = [f"r{i}" for i in range(n)] + (["after"] if how == "pad" else [])
    assert ids == expected or rejects, "damaged data read as if it were whole"
    if not rejects:
        assert ids == expected
    _check(read, path, None, "gzip")  # (damaged data may inflate to more lines)
    decompressed = zlib.decompressobj(31)
    try:
        decompressed.decompress(path.read_bytes())
    except zlib.error:
        pass
    COUNTS["gzip"]["damaged"] += bool(rejects and any("gzip" in r["reason"] for r in rejects))


def _csv_rows_in(data: bytes, limit: int) -> int:
    """Rows (with a value) and lines over ``limit`` characters in a CSV file, its header row
    aside: the csv module reads the lines between long lines afresh, as the source does."""
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", text)
    segments: list[list[str]] = [[]]
    for line in lines:
        if len(line.rstrip("\r\n")) > limit:
            segments.append([])
        else:
            segments[-1].append(line)
    n = len(segments) - 1 - 1  # (the header row)
    for segment in segments:
        reader = csv.reader(segment)
        while True:
            try:
                n += any(next(reader))
            except StopIteration:
                break
            except csv.Error:
                n += 1
    return n


CELL = st.one_of(st.text(max_size=8), st.sampled_from(["", "1.5", "x,y", 'say "hi"', "a\nb",
                                                         "a\r\nb", "\r", "[\"p\"]", "{}"]))


@fuzz(examples=120)
@given(rows=st.lists(st.lists(CELL, min_size=1, max_size=5), max_size=20),
       bad=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 40)), max_size=3),
       bom=st.booleans(), gz=st.booleans(), crlf=st.booleans(),
       limit=st.integers(30, 400))
def test_fuzzed_csv_rows_are_records_or_rejects(tmp_path_factory, rows: list[list[str]],
                                                bad: list[tuple[int, int]], bom: bool,
                                                gz: bool, crlf: bool, limit: int) -> None:
    """Rows with any cells (commas, quotes, newlines, the wrong count), some with a byte that
    is not UTF-8: each row with a value is a record or a reject at its line."""
    tmp = tmp_path_factory.mktemp("csv")
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n" if crlf else "\n")
    writer.writerow(["record_id", "output", "model"])
    writer.writerows(rows)
    encoded = [line + b"\n" for line in text.getvalue().encode().split(b"\n")][:-1]
    for row, at in bad:  # a byte that is not UTF-8 in a data line
        if 1 + row < len(encoded):
            line = encoded[1 + row]
            encoded[1 + row] = line[:at] + b"\xff" + line[at:]
    data = (b"\xef\xbb\xbf" if bom else b"") + b"".join(encoded)
    path = tmp / ("a.csv.gz" if gz else "a.csv")
    path.write_bytes(gzip.compress(data) if gz else data)
    read = read_csv(path, tmp, max_line_bytes=limit)
    records, rejects, _ = read
    assert len(records) + len(rejects) == _csv_rows_in(data, limit)
    _check(read, path, len(re.split(rb"\r\n|\r|\n", data)), "csv")  # (CR ends a line too)
