"""Files as they arrive: byte-order marks, UTF-16, CRLF, empty files, gzip that is cut short
or damaged or not gzip at all, directories, other compressions, lines over the limit. Each
ends in one error naming the file and the fix, or in rejects for what cannot be read with
the rest kept; every JSONL case reads as the plain reference reader does."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import zipfile
from pathlib import Path

import pytest

from evalkit.errors import SourceError
from tests.conftest import run_cli
from tests.reliability.readers import read_csv, read_jsonl, read_jsonl_checked

LINES = [json.dumps({"id": f"r{i}", "output": f"answer {i}"}).encode() + b"\n"
         for i in range(300)]
PLAIN = b"".join(LINES)


def _ids(records: list[dict]) -> list[str]:
    return [r["record_id"] for r in records]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("name,data", [
    ("bom.jsonl", b"\xef\xbb\xbf" + PLAIN),
    ("crlf.jsonl", PLAIN.replace(b"\n", b"\r\n")),
    ("bom.jsonl.gz", gzip.compress(b"\xef\xbb\xbf" + PLAIN)),
    ("named.jsonl.gz", PLAIN),  # a plain file named .gz
    ("named.jsonl", gzip.compress(PLAIN)),  # gzip data without the name
    ("members.jsonl.gz", gzip.compress(PLAIN[:5000]) + gzip.compress(PLAIN[5000:]) + b"\0" * 9),
])
def test_every_line_is_read_whatever_the_file_was_saved_as(tmp_path: Path, name: str,
                                                           data: bytes, workers: int) -> None:
    records, rejects, _ = read_jsonl_checked(_write(tmp_path / name, data), tmp_path,
                                             record_id="id", workers=workers, batch_size=64)
    assert _ids(records) == [f"r{i}" for i in range(300)] and rejects == []


def _gz_damaged(kind: str) -> bytes:
    data = gzip.compress(PLAIN)
    if kind == "cut":
        return data[:len(data) // 2]
    if kind == "crc":
        return data[:-8] + bytes([data[-8] ^ 1]) + data[-7:]
    if kind == "length":
        return data[:-1] + bytes([data[-1] ^ 1])
    return data + b"trailing bytes that are not gzip"


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("kind", ["cut", "crc", "length", "trailing"])
def test_damaged_gzip_keeps_what_was_read_and_rejects_the_rest(tmp_path: Path, kind: str,
                                                               workers: int) -> None:
    path = _write(tmp_path / "a.jsonl.gz", _gz_damaged(kind))
    records, rejects, _ = read_jsonl_checked(path, tmp_path, record_id="id", workers=workers,
                                             batch_size=50)
    (reject,) = rejects
    line = int(reject["location"].rsplit(":", 1)[1])
    assert reject["location"].startswith(str(path))
    assert "gzip data" in reject["reason"] and "copy or compress the file again" in \
        reject["reason"]
    assert _ids(records) == [f"r{i}" for i in range(line - 1)]  # every whole line before it
    if kind == "cut":
        assert 1 < line < 300 and reject["raw"].startswith('{"id": "r')
    else:
        assert line == 301  # the data is all there; the damage is after it


def test_a_damaged_gzip_run_keeps_and_counts_what_was_read(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl.gz", _gz_damaged("cut"))
    proc = run_cli("run", "source=jsonl", "source.path=a.jsonl.gz", cwd=tmp_path)
    assert "rejected 1" in proc.stdout and "cut short" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("name,data,says", [
    ("u16.jsonl", PLAIN.decode().encode("utf-16"), "is UTF-16 text"),
    ("u16be.jsonl", b"\xfe\xff" + PLAIN.decode().encode("utf-16-be"), "is UTF-16 text"),
    ("u32.jsonl", PLAIN.decode().encode("utf-32"), "is UTF-32 text"),
    ("u16.jsonl.gz", gzip.compress(PLAIN.decode().encode("utf-16")), "is UTF-16 text"),
    ("a.jsonl.bz2", bz2.compress(PLAIN), "bzip2"),
    ("a.jsonl.xz", lzma.compress(PLAIN), "xz"),
])
def test_files_that_are_not_utf8_text_stop_the_run_naming_the_file_and_fix(
        tmp_path: Path, name: str, data: bytes, says: str) -> None:
    path = _write(tmp_path / name, data)
    with pytest.raises(SourceError, match=says) as err:
        read_jsonl(path, tmp_path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_cli_prints_one_line_and_exits_2_for_a_file_it_cannot_read(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", PLAIN.decode().encode("utf-16"))
    _write(tmp_path / "a.csv", b"record_id,outp\xffut\nr1,a\n")
    for kind in ("jsonl", "csv"):
        proc = run_cli("run", f"source={kind}", f"source.path=a.{kind}", cwd=tmp_path,
                       check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.startswith(f"evalkit: error: a.{kind}") and \
            len(proc.stderr.strip().splitlines()) == 1


def test_a_zip_archive_and_a_directory_are_refused_with_the_fix(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "a.jsonl.zip", "w") as archive:
        archive.writestr("a.jsonl", PLAIN)
    with pytest.raises(SourceError, match="zip archive.*unzip"):
        read_jsonl(tmp_path / "a.jsonl.zip", tmp_path)
    (tmp_path / "x.jsonl").mkdir()
    with pytest.raises(SourceError, match=r"is a directory.*x\.jsonl/\*"):
        read_jsonl(tmp_path / "x.jsonl", tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.jsonl", PLAIN)
    path.chmod(0)
    with pytest.raises(SourceError, match="cannot open"):
        read_jsonl(path, tmp_path)


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", b"\xef\xbb\xbf", gzip.compress(b"", mtime=0)])
def test_empty_files_read_as_no_records(tmp_path: Path, data: bytes) -> None:
    assert read_jsonl_checked(_write(tmp_path / "e.jsonl", data), tmp_path) == ([], [], [])


@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("gz", [False, True])
def test_lines_over_the_limit_are_rejects_and_the_others_are_read(tmp_path: Path,
                                                                  workers: int,
                                                                  gz: bool) -> None:
    """Lines of every length around the limit, at the start, middle and end of blocks."""
    limit = 200
    lines = []
    for i in range(400):
        size = [10, 150, limit, limit + 1, 3 * limit, 20 * limit][i % 6] + i % 3
        head = b'{"id":"r%d","output":"' % i
        lines.append(head + b"y" * max(0, size - len(head) - 2) + b'"}\n')
    data = b"".join(lines)
    path = _write(tmp_path / ("a.jsonl.gz" if gz else "a.jsonl"),
                  gzip.compress(data) if gz else data)
    records, rejects, _ = read_jsonl_checked(path, tmp_path, record_id="id",
                                             max_line_bytes=limit, batch_size=7,
                                             workers=workers)
    over = [i for i, line in enumerate(lines) if len(line) - 1 > limit]
    assert [int(r["location"].rsplit(":", 1)[1]) - 1 for r in rejects] == over
    assert all("over source.max_line_bytes (200)" in r["reason"] for r in rejects)
    assert _ids(records) == [f"r{i}" for i in range(400) if i not in over]


def test_a_long_first_line_reads_in_bounded_memory(tmp_path: Path) -> None:
    """A 2 MB first line made the reader ask for 16 GB (the first lines' size times
    batch_size): a MemoryError, nothing kept."""
    big = json.dumps({"id": "big", "output": "x" * 2_000_000}).encode() + b"\n"
    path = _write(tmp_path / "a.jsonl", big + PLAIN)
    records, rejects, _ = read_jsonl_checked(path, tmp_path, record_id="id")
    assert _ids(records) == ["big"] + [f"r{i}" for i in range(300)] and rejects == []


CSV = "record_id,output\r\n" + "".join(f"r{i},answer {i}\r\n" for i in range(50))


@pytest.mark.parametrize("name,data", [
    ("bom.csv", b"\xef\xbb\xbf" + CSV.encode()),  # a spreadsheet's "CSV UTF-8"
    ("lf.csv", CSV.replace("\r\n", "\n").encode()),
    ("cr.csv", CSV.replace("\r\n", "\r").encode()),
    ("a.csv.gz", gzip.compress(b"\xef\xbb\xbf" + CSV.encode())),
])
def test_csv_rows_are_read_whatever_the_file_was_saved_as(tmp_path: Path, name: str,
                                                          data: bytes) -> None:
    records, rejects, _ = read_csv(_write(tmp_path / name, data), tmp_path,
                                   record_id="record_id")
    assert _ids(records) == [f"r{i}" for i in range(50)] and rejects == []


@pytest.mark.parametrize("data,says", [
    (b"record_id,outp\xffut\nr1,a\n", r"a\.csv:1: the header row is not UTF-8 \(byte 0xff\)"),
    (CSV.encode("utf-16"), "is UTF-16 text"),
    (b"record_id,output,output\nr1,a,b\n", "names column 'output' more than once"),
])
def test_a_csv_whose_header_cannot_be_read_is_one_line_naming_it(tmp_path: Path, data: bytes,
                                                                says: str) -> None:
    _write(tmp_path / "a.csv", data)
    with pytest.raises(SourceError, match=says):
        read_csv(tmp_path / "a.csv", tmp_path)


def test_csv_damaged_gzip_long_lines_and_long_cells_are_rejects(tmp_path: Path) -> None:
    data = gzip.compress(CSV.encode())
    records, rejects, _ = read_csv(_write(tmp_path / "a.csv.gz", data[:len(data) * 2 // 3]),
                                   tmp_path, record_id="record_id")
    (reject,) = rejects
    line = int(reject["location"].rsplit(":", 1)[1])
    assert "cut short" in reject["reason"] and _ids(records) == [f"r{i}" for i in
                                                                 range(line - 2)]
    long_line = "r1," + "x" * 500 + "\n"
    unclosed = 'r2,"' + "y" * 300 + "\n" + "z" * 300 + "\n"
    text = "record_id,output\nr0,a\n" + long_line + unclosed + "r3,b\n"
    records, rejects, _ = read_csv(_write(tmp_path / "b.csv", text.encode()), tmp_path,
                                   record_id="record_id", max_line_bytes=400)
    assert [r["location"].rsplit(":", 1)[1] for r in rejects] == ["3", "4"]
    assert "over source.max_line_bytes" in rejects[0]["reason"]
    assert "a cell is over source.max_line_bytes" in rejects[1]["reason"]
    assert _ids(records) == ["r0", "r3"]


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 10**400])
def test_integers_orjson_cannot_hold_read_as_the_plain_reader_does(tmp_path: Path,
                                                                   big: int) -> None:
    """msgspec (the typed decoding) keeps any integer whole; orjson reads one beyond 64 bits
    as a float, or refuses it: a chunk holding one is read again line by line (found by
    fuzzing: the metadata held 20000000000000000000 one way and 2e+19 the other)."""
    rows = [{"id": "a", "team": 1}, {"id": "b", "team": big}, {"id": big, "team": 2},
            {"id": "c", "timestamp": big}, {"id": "d", "tags": [big]},
            {"id": "e", "output": big}]
    path = _write(tmp_path / "a.jsonl", b"".join(json.dumps(r).encode() + b"\n"
                                                 for r in rows))
    for options in ({}, {"record_id": "id"}):
        read_jsonl_checked(path, tmp_path, batch_size=2, **options)


@pytest.mark.parametrize("workers", [0, 1])
def test_an_id_met_again_twice_in_a_later_chunk_names_its_first_line(tmp_path: Path,
                                                                     workers: int) -> None:
    """Found by the gzip soak: the third 'x' (line 6) was said to be first seen at line 4,
    itself a duplicate of line 2 in the chunk before."""
    rows = [{"id": i} for i in ("a", "x", "b", "x", "c", "x")]
    path = _write(tmp_path / "a.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    _, rejects, _ = read_jsonl_checked(path, tmp_path, record_id="id", batch_size=3,
                                       workers=workers)
    assert [r["reason"].rsplit(":", 1)[1] for r in rejects] == ["2)", "2)"]
