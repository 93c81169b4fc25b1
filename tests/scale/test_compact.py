"""``evalkit compact`` merges the judgment parts of finished runs into one file each without
changing any query's result, and leaves unfinished runs alone."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.commands import compact
from evalkit.results.query import connect
from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end

QUERIES = [
    "SELECT * FROM judgments ORDER BY run_id, record_id, judge",
    "SELECT judge, status, count(*), avg(value), sum(cost_usd) FROM judgments GROUP BY ALL "
    "ORDER BY ALL",
    "SELECT r.model, avg(j.value) FROM judgments j JOIN records r USING (run_id, record_id) "
    "GROUP BY ALL ORDER BY ALL",
    "SELECT run_id, n_judgments, status FROM runs ORDER BY run_id",
]


def _exact(value: object) -> object:
    # a float sum's last bits follow DuckDB's (threaded) order of addition, compacted or not
    return float(f"{value:.12g}") if isinstance(value, float) else value


def _answers(root: Path) -> list[list[tuple]]:
    con = connect(root / "runs", include_unfinished=True)  # (one run is marked running)
    return [[tuple(_exact(v) for v in row) for row in con.execute(q).fetchall()]
            for q in QUERIES]


def test_compact_keeps_every_query_result_and_leaves_one_file(tmp_path: Path) -> None:
    for threshold in ("0.5", "0.9"):
        run_cli("run", "+experiment=quickstart", f"judges.prompt_echo.threshold={threshold}",
                "runner.batch_size=16", "runner.summary=false", cwd=tmp_path)
    dirs = run_dirs(tmp_path, "quickstart")
    parts = [len(list((d / "judgments").glob("*.parquet"))) for d in dirs]
    assert min(parts) > 1
    # a run still being written is left as it is
    running = dirs[1]
    manifest = json.loads((running / "manifest.json").read_text())
    (running / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    before = _answers(tmp_path)

    out = run_cli("compact", cwd=tmp_path).stdout
    assert f"compacted 1 of 2 runs: {parts[0]} judgment parts into 1 files" in out
    assert [p.name for p in (dirs[0] / "judgments").iterdir()] == ["part-00000.parquet"]
    # the parts' rows are gathered into row groups, not one row group per part
    assert pq.ParquetFile(dirs[0] / "judgments" / "part-00000.parquet").num_row_groups == 1
    assert len(list((running / "judgments").glob("*.parquet"))) == parts[1]
    assert not list(dirs[0].glob(".judgments-*"))
    (running / "manifest.json").write_text(json.dumps(manifest))
    after_one = _answers(tmp_path)
    before[3] = after_one[3]  # (the runs table changed by hand above, not by compact)
    assert after_one == before

    run_cli("compact", running.name, cwd=tmp_path)
    assert _answers(tmp_path) == before
    assert "compacted 0 of 2 runs" in run_cli("compact", cwd=tmp_path).stdout


def test_row_groups_stay_bounded_and_keep_the_order(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "judgments").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"status": "ok"}))
    for k in range(7):  # parts of 30 rows; a row group holds 100 rows or 1,000 bytes
        part = pa.table({"record_id": [f"r{k}-{i}" for i in range(30)],
                         "value": [float(k * 30 + i) for i in range(30)]})
        pq.write_table(part, run_dir / "judgments" / f"part-{k:05d}.parquet")
    monkeypatch.setattr(compact, "ROW_GROUP_ROWS", 100)
    assert compact.compact_run(run_dir) == 7
    merged = pq.ParquetFile(run_dir / "judgments" / "part-00000.parquet")
    sizes = [merged.metadata.row_group(i).num_rows for i in range(merged.num_row_groups)]
    assert sizes == [120, 90]
    assert merged.read().column("value").to_pylist() == [float(i) for i in range(210)]

    for k in range(3):
        pq.write_table(pa.table({"value": [1.0] * 200}),
                       run_dir / "judgments" / f"part-{k + 1:05d}.parquet")
    monkeypatch.setattr(compact, "ROW_GROUP_BYTES", 1000)  # 200 doubles: 1,600 bytes
    assert compact.compact_run(run_dir) == 4
    merged = pq.ParquetFile(run_dir / "judgments" / "part-00000.parquet")
    sizes = [merged.metadata.row_group(i).num_rows for i in range(merged.num_row_groups)]
    assert sizes == [210, 200, 200, 200]


def test_a_swap_a_crash_interrupted_is_put_back(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / ".judgments-old-123").mkdir(parents=True)
    (run_dir / ".judgments-old-123" / "part-00000.parquet").write_bytes(b"x")
    (run_dir / ".judgments-new-123").mkdir()
    compact._recover(run_dir)
    assert (run_dir / "judgments" / "part-00000.parquet").read_bytes() == b"x"
    assert sorted(p.name for p in run_dir.iterdir()) == ["judgments"]
