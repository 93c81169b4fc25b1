"""`evalkit query` and `evalkit.connect`: views over every run, output formats, and a
connection that can read the runs directory and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evalkit
from evalkit.errors import QueryError
from evalkit.results import query as query_module
from evalkit.results.query import ReadOnlyConnection, connect, run_query
from evalkit.results.schemas import JUDGMENTS, METRICS, RECORDS, conform
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("q")
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=cwd)
    # an older run whose metrics file lacks a column the schema has now
    old = cwd / "runs" / "legacy" / "r0"
    old.mkdir(parents=True)
    table = conform([{"run_id": "r0", "metric": "echo_rate", "slice": "all", "value": 0.5}],
                    METRICS).drop_columns(["details"])
    pq.write_table(table, old / "metrics.parquet")
    (old / "manifest.json").write_text(json.dumps({"run_id": "r0", "experiment": "legacy",
                                                   "status": "ok"}))
    return cwd


def test_views_cover_every_run_with_union_by_name(project: Path) -> None:
    con = evalkit.connect(str(project / "runs"))
    runs = con.sql("SELECT count(*) FROM (SELECT DISTINCT run_id FROM metrics)").fetchone()
    assert runs == (2,)
    assert con.sql("SELECT count(*) FROM metrics WHERE run_id = 'r0' AND details IS NULL"
                   ).fetchone() == (1,)
    for view in ("runs", "records", "judgments", "alerts", "rejects"):
        con.sql(f"SELECT * FROM {view} LIMIT 1").fetchall()
    status = con.sql("SELECT status, n_records, experiment FROM runs ORDER BY experiment"
                     ).fetchall()
    assert status == [("ok", None, "legacy"), ("ok", 160, "quickstart")]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_parquet('../../x.parquet')",
])
def test_reading_outside_the_runs_directory_is_refused(project: Path, sql: str) -> None:
    con = evalkit.connect(str(project / "runs"))
    with pytest.raises(QueryError, match="may read only the runs directory"):
        run_query(con, sql)


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO 'elsewhere.csv'",
    "SET enable_external_access = true",
    "ATTACH '/tmp/other.duckdb'",
    "CREATE TABLE t AS SELECT 1",
    "SELECT 1; SELECT 2",
    "SELECT 1 \x00 FROM read_csv('/etc/passwd')",
])
def test_only_one_select_is_allowed(project: Path, sql: str) -> None:
    con = evalkit.connect(str(project / "runs"))
    with pytest.raises(QueryError):
        run_query(con, sql)
    assert not (project / "elsewhere.csv").exists()


def test_cli_formats(project: Path, tmp_path: Path) -> None:
    sql = "SELECT metric, value FROM metrics WHERE slice = 'all' AND metric = 'echo_rate' " \
          "ORDER BY run_id"
    table_out = run_cli("query", sql, cwd=project).stdout
    assert "echo_rate" in table_out and "2 rows" in table_out
    csv_out = run_cli("query", sql, "--format", "csv", cwd=project).stdout
    assert csv_out.splitlines()[0] == "metric,value"
    out = tmp_path / "m.parquet"
    run_cli("query", sql, "--out", str(out), cwd=project)
    assert pq.read_table(out).num_rows == 2
    jout = tmp_path / "m.json"
    run_cli("query", "SELECT context FROM records LIMIT 1", "--out", str(jout), cwd=project)
    assert json.loads(jout.read_text())[0]["context"] is None


def test_cli_refusal_is_one_line(project: Path) -> None:
    proc = run_cli("query", "COPY (SELECT 1) TO '/tmp/x.csv'", cwd=project, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("evalkit: error: query: refused: only SELECT")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_query_imports_no_dataframe_library(project: Path) -> None:
    # binding a Python parameter makes DuckDB import pandas when it is installed (0.3 s of a
    # 0.5 s start-up): the query layer's own statements bind none
    probe = ("import sys\nfrom evalkit.cli import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\nprint(sorted({m.split('.')[0] for m in sys.modules} "
             "& {'pandas', 'numpy', 'pyarrow', 'polars', 'litellm', 'hydra', 'aiohttp'}))")
    for fmt in ("table", "csv"):
        out = subprocess.run(
            [sys.executable, "-c", probe, "query", "SELECT judge, avg(value) FROM judgments "
             "JOIN runs USING (run_id) GROUP BY ALL", "--format", fmt], cwd=project,
            capture_output=True, text=True, check=True).stdout
        assert out.splitlines()[-1] == "[]", out


LAZY_QUERIES = [
    "SELECT judge, count(*), avg(value) FROM judgments GROUP BY ALL ORDER BY ALL",
    "WITH j AS (SELECT * FROM judgments) SELECT count(*) FROM j JOIN records USING (record_id)",
    "SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM main.alerts)",
    "SELECT run_id FROM latest JOIN rejects USING (run_id)",
    "SHOW TABLES",
    "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1",
    "SELECT table_name FROM information_schema.tables ORDER BY 1",
    "DESCRIBE judgments",
    "SUMMARIZE SELECT judge, status FROM Judgments",  # (a float std follows thread order)
]


@pytest.mark.parametrize("sql", LAZY_QUERIES)
def test_views_made_when_named_answer_as_views_made_up_front(
        project: Path, sql: str) -> None:
    def rows(con: ReadOnlyConnection) -> list[tuple]:
        # a float sum's last bits follow DuckDB's threaded order of addition
        return [tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
                for row in con.sql(sql).fetchall()]

    eager = ReadOnlyConnection(connect(project / "runs"))
    assert rows(evalkit.connect(str(project / "runs"))) == rows(eager)


def test_a_query_reads_only_the_tables_it_names(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # making a view reads the footer of each of its files: over thousands of runs, a
    # query naming one table must not pay for the other four
    run_dir = tmp_path / "runs" / "exp" / "r1"
    (run_dir / "judgments").mkdir(parents=True)
    pq.write_table(conform([{"run_id": "r1", "record_id": "a", "judge": "j", "value": 1.0}],
                           JUDGMENTS), run_dir / "judgments" / "part-00000.parquet")
    (run_dir / "records.parquet").write_bytes(b"not parquet")
    (run_dir / "manifest.json").write_text('{"run_id": "r1", "experiment": "exp", '
                                           '"status": "ok"}')
    sql = "SELECT judge, value FROM judgments"
    assert evalkit.connect(str(tmp_path / "runs")).sql(sql).fetchall() == [("j", 1.0)]
    assert run_cli("query", sql, "--format", "csv", cwd=tmp_path).stdout == "judge,value\nj,1.0\n"
    # a table file that is not Parquet is left out of its view in one warning line naming it
    # (docs/reliability.md, "A runs directory is input"); the other runs are still served
    proc = run_cli("query", "SELECT count(*) AS n FROM records", "--format", "csv",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 0 and proc.stdout == "n\n0\n"
    assert len(proc.stderr.strip().splitlines()) == 1 and "records.parquet" in proc.stderr
    # a view named in a way the parse tree does not show: every view is made, then the query
    pq.write_table(conform([{"run_id": "r1", "record_id": "a"}], RECORDS),
                   run_dir / "records.parquet")
    monkeypatch.setattr(query_module, "_make_pending_views", lambda con, tree: None)
    assert evalkit.connect(str(tmp_path / "runs")).sql(sql).fetchall() == [("j", 1.0)]


def test_empty_runs_directory_has_typed_empty_views(tmp_path: Path) -> None:
    con = evalkit.connect(str(tmp_path))
    assert con.sql("SELECT count(*) FROM judgments WHERE value > 0").fetchone() == (0,)
    types = dict(con.sql("DESCRIBE records").fetchall()[i][:2] for i in range(3))
    assert types["run_id"] == "VARCHAR"
    assert isinstance(run_query(con, "SELECT * FROM runs", arrow=True), pa.Table)
