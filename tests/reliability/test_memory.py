"""Memory stays bounded whatever the input's line lengths: a real ``evalkit run`` over a
file with lines from 1 byte to 200 MB, its whole process tree measured."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import EVALKIT, run_dirs
from tests.reliability.procmem import run_measured

GIB = 1 << 30
LIMIT = 32 << 20  # source.max_line_bytes' default


def _line(i: int, size: int) -> bytes:
    """A JSON object line of ``size`` bytes (newline aside)."""
    head = b'{"id":"r%d","output":"' % i
    return head + b"x" * (size - len(head) - 2) + b'"}\n'


def write_lines(path: Path, sizes: list[int], short_after: int = 1000) -> None:
    """Lines of ``sizes`` bytes (a 1-byte line is ``7``: JSON, not an object), then
    ``short_after`` short lines."""
    with path.open("wb") as fh:
        for i, size in enumerate(sizes):
            fh.write(b"7\n" if size == 1 else _line(i, size))
        for i in range(len(sizes), len(sizes) + short_after):
            fh.write(_line(i, 40))


SIZES = [1, 30, 1_000, 100_000, 2_000_000, 10_000_000, LIMIT - 1, LIMIT, LIMIT + 1,
         60_000_000, 200_000_000, 64]


def test_lines_up_to_200_mb_keep_the_process_tree_under_2_gib(tmp_path: Path) -> None:
    data = tmp_path / "lines.jsonl"
    write_lines(data, SIZES)
    proc, peak = run_measured([EVALKIT, "run", "source=jsonl", f"source.path={data}",
                               "+source.record_id=id"],
                              cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert peak < 2 * GIB, f"peak {peak / GIB:.2f} GiB"
    (run,) = run_dirs(tmp_path, "default")
    manifest = json.loads((run / "manifest.json").read_text())
    over = [i for i, s in enumerate(SIZES) if s > LIMIT]
    rejects = pq.read_table(run / "rejects.parquet").to_pylist()
    by_line = {int(r["location"].rsplit(":", 1)[1]): r for r in rejects}
    assert sorted(by_line) == [1] + [i + 1 for i in over]
    for i in over:
        reason = by_line[i + 1]["reason"]
        assert f"line of {SIZES[i]:,} bytes is over source.max_line_bytes" in reason
        assert len(by_line[i + 1]["raw"]) < 1100  # its first bytes, not the line
    records = pq.read_table(run / "records.parquet", columns=["record_id", "output"])
    kept = {r: len(o) for r, o in zip(records.column("record_id").to_pylist(),
                                        records.column("output").to_pylist(), strict=True)}
    for i, size in enumerate(SIZES):
        if 1 < size <= LIMIT:  # read whole, whatever its size
            assert kept[f"r{i}"] == size - len(b'{"id":"r%d","output":""}' % i)
    assert manifest["n_records"] == len(SIZES) - 1 - len(over) + 1000
    assert manifest["n_rejects"] == 1 + len(over)
