"""Many small inputs cost what one does: a source's small batches (one per file) are
gathered into batches of ``runner.batch_size`` before filters, judges and the writer, so 300
one-line files give the records, judgments and metrics one file gives, in as few judgment
parts (bench/bench_many_files.py measures the time and memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.plugin import ImportedScores, Reject
from evalkit.runner.coalesce import coalesced
from tests.conftest import run_cli

N = 300


def _rows() -> list[dict]:
    return [{"id": f"r{i}", "model": f"m{i % 3}", "input": f"say {i}",
             "output": f"say {i}" if i % 4 == 0 else f"reply {i}"} for i in range(N)]


@pytest.mark.e2e
def test_many_one_line_files_are_judged_as_one_file_is(tmp_path: Path) -> None:
    rows = _rows()
    (tmp_path / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "many").mkdir()
    for i, r in enumerate(rows):
        (tmp_path / "many" / f"f{i:04d}.jsonl").write_text(json.dumps(r) + "\n")
    (tmp_path / "many" / "f9999.jsonl").write_text("not json\n")  # a reject among them
    out = {}
    for name, path in (("one", "one.jsonl"), ("many", "many/*.jsonl")):
        run_cli("run", "source=jsonl", f"source.path='{path}'", "source.record_id=id",
                "judges=[prompt_echo]", "+metrics.echo={plugin: rate, judge: prompt_echo}",
                "runner.summary=false",
                f"runner.runs_dir=runs_{name}", cwd=tmp_path)
        (run_dir,) = [p for p in (tmp_path / f"runs_{name}" / "default").iterdir()]
        parts = sorted((run_dir / "judgments").glob("part-*.parquet"))
        judged = pa.concat_tables(pq.read_table(p) for p in parts)
        out[name] = (len(parts),
                     sorted(pq.read_table(run_dir / "records.parquet")
                            .column("record_id").to_pylist()),
                     sorted(zip(judged.column("record_id").to_pylist(),
                                judged.column("value").to_pylist(), strict=True)),
                     pq.read_table(run_dir / "metrics.parquet").column("value").to_pylist(),
                     pq.read_table(run_dir / "rejects.parquet").num_rows)
    assert out["many"][0] == out["one"][0] == 1  # one part per judge, not one per file
    assert out["many"][1:4] == out["one"][1:4]
    assert (out["one"][4], out["many"][4]) == (0, 1)


def test_coalesced_gathers_small_batches_and_keeps_the_rest_in_order() -> None:
    def table(ids: list[str]) -> pa.Table:
        return pa.table({"record_id": pa.array(ids, pa.string())})

    scores = ImportedScores(pa.table({"record_id": ["b"]}))
    reject = Reject("f:1", "bad", None)
    items = [table(["a"]), scores, table(["b"]), reject, table(["c", "d", "e"]), table(["f"])]
    out = list(coalesced(iter(items), 2, "run"))
    kinds = [type(x).__name__ for x in out]
    tables = [x for x in out if isinstance(x, pa.Table)]
    assert [t.column("record_id").to_pylist() for t in tables] == [["a", "b"], ["c", "d", "e"],
                                                                   ["f"]]
    assert all(t.column("run_id").to_pylist() == ["run"] * t.num_rows for t in tables)
    # the scores come out before the batch that holds their records, the reject in turn
    assert kinds == ["ImportedScores", "Table", "Reject", "Table", "Table"]
    assert all(t.column(0).num_chunks == 1 for t in tables)
