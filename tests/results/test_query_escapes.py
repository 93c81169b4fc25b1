"""The query layer's read-only guarantee, attacked: every statement here tries to write, to
read outside the runs directory, to change a setting or to load an extension, through some
wrapper; each must be refused with a one-line error, from the Python API and from the CLI,
and leave the runs directory and the working directory byte-identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import evalkit
from evalkit.errors import QueryError
from tests.conftest import run_cli

METRICS_FILE = "runs/exp/r1/metrics.parquet"
INSIDE = "runs/exp/r1/forged.parquet"

ESCAPES = [
    # writing, wrapped in a statement that passes for a read
    f"EXPLAIN ANALYZE COPY (SELECT 'forged' AS metric) TO '{METRICS_FILE}' (FORMAT parquet)",
    f"EXPLAIN COPY (SELECT 1) TO '{INSIDE}'",
    "EXPLAIN ANALYZE SELECT * FROM metrics",
    f"explain   analyze\n  copy metrics to '{INSIDE}'",
    f"/* a comment */ EXPLAIN (FORMAT json) COPY metrics TO '{INSIDE}'",
    # writing, plainly
    f"COPY (SELECT 1) TO '{INSIDE}'",
    f"COPY metrics TO '{METRICS_FILE}' (FORMAT parquet)",
    "COPY metrics TO 'outside.csv'",
    "COPY metrics FROM '/etc/hostname'",
    "EXPORT DATABASE 'runs/dump'",
    "IMPORT DATABASE 'runs/exp'",
    f"SELECT 1; COPY (SELECT 1) TO '{INSIDE}'",
    f"SELECT 1 /* ; */ ; COPY (SELECT 1) TO '{INSIDE}'",
    f"-- a read\nCOPY (SELECT 1) TO '{INSIDE}'",
    # other databases and the catalog
    "ATTACH 'runs/new.duckdb' AS other",
    "ATTACH ':memory:' AS other",
    "DETACH memory",
    "USE memory",
    "CREATE TABLE t AS SELECT 1",
    "CREATE OR REPLACE VIEW metrics AS SELECT 'forged' AS metric",
    "CREATE MACRO forged(x) AS x + 1",
    "CREATE TEMP TABLE t AS SELECT * FROM metrics",
    "DROP VIEW metrics",
    "INSERT INTO metrics SELECT * FROM metrics",
    "DELETE FROM metrics",
    "UPDATE metrics SET value = 0",
    "PIVOT metrics ON slice USING count(*)",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    # prepared statements
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "DEALLOCATE p",
    # settings, extensions, pragmas
    "SET enable_external_access = true",
    "SET allowed_directories = ['/']",
    "RESET lock_configuration",
    "SET temp_directory = 'runs/spill'",
    "SET GLOBAL log_query_path = 'runs/log.txt'",
    "SET VARIABLE x = 1",
    "INSTALL httpfs",
    "FORCE INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA enable_profiling",
    "CALL pragma_version()",
    # table functions that run SQL given as text, or change state
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM query_table('metrics')",
    "SELECT * FROM json_execute_serialized_sql("
    "json_serialize_sql('SELECT 1'))",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SELECT * FROM enable_logging()",
    "SELECT * FROM enable_profiling()",
    "SELECT * FROM truncate_duckdb_logs()",
    "WITH t AS (SELECT * FROM query('SELECT 1')) SELECT * FROM t",
    "SELECT (SELECT count(*) FROM checkpoint()) AS n",
    "SELECT * FROM metrics WHERE value IN (SELECT 1 FROM enable_profiling())",
    "SELECT * FROM metrics m JOIN (FROM query_table('runs')) r USING (run_id)",
    "SELECT * FROM read_duckdb('runs/x.duckdb')",
    # reading outside the runs directory
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM read_text('outside.txt')",
    "SELECT * FROM read_text('runs/../outside.txt')",
    "SELECT * FROM read_blob('/proc/self/environ')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM parquet_metadata('../x.parquet')",
    "WITH t AS (SELECT * FROM read_text('outside.txt')) SELECT * FROM t",
    "SELECT * FROM read_text('runs/exp/peek/secret.txt')",  # a link out of the runs dir
    "SELECT * FROM glob('runs/exp/peek/*')",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_extensions()",
    # Python variables in the caller's frames
    "SELECT * FROM ESCAPES",
]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every path under ``root`` with a hash of its bytes (directories as such)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = b"dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).digest()
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cwd = tmp_path_factory.mktemp("escapes")
    run = cwd / "runs" / "exp" / "r1"
    run.mkdir(parents=True)
    pq.write_table(pa.table({"run_id": ["r1"], "metric": ["echo_rate"], "slice": ["all"],
                             "value": [0.25]}), run / "metrics.parquet")
    (run / "manifest.json").write_text('{"run_id": "r1", "experiment": "exp", "status": "ok"}')
    (cwd / "outside.txt").write_text("a secret outside the runs directory\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "secret.txt").write_text("a secret a link points to\n")
    (cwd / "runs" / "exp" / "peek").symlink_to(elsewhere, target_is_directory=True)
    return cwd


def test_there_are_forty_escapes_or_more() -> None:
    assert len(ESCAPES) >= 40 and len(set(ESCAPES)) == len(ESCAPES)


@pytest.mark.parametrize("sql", ESCAPES)
def test_the_python_api_refuses(project: Path, sql: str, monkeypatch: pytest.MonkeyPatch
                                ) -> None:
    monkeypatch.chdir(project)
    before = snapshot(project)
    con = evalkit.connect("runs")
    with pytest.raises(QueryError) as err:
        con.sql(sql).fetchall()
    assert len(str(err.value).splitlines()) == 1
    assert snapshot(project) == before
    # and the runs still read as they were
    assert con.sql("SELECT metric, value FROM metrics").fetchall() == [("echo_rate", 0.25)]


CLI_ESCAPES = [ESCAPES[0], ESCAPES[5], ESCAPES[12], "SELECT * FROM query('SELECT 1')",
               "SELECT * FROM read_text('outside.txt')", "SET enable_external_access = true",
               "PIVOT metrics ON slice USING count(*)", "LOAD httpfs"]


@pytest.mark.parametrize("sql", CLI_ESCAPES)
def test_the_cli_refuses_in_one_line(project: Path, sql: str) -> None:
    before = snapshot(project)
    proc = run_cli("query", sql, cwd=project, check=False)
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.startswith("evalkit: error: query: ")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert snapshot(project) == before


@pytest.mark.parametrize("sql", [
    "SELECT metric, value FROM metrics",
    "FROM metrics",
    "WITH m AS (SELECT * FROM metrics) SELECT count(*) FROM m",
    "DESCRIBE metrics",
    "SUMMARIZE metrics",
    "SHOW TABLES",
    "VALUES (1, 2)",
    "SELECT * FROM read_parquet('runs/*/*/metrics.parquet')",
    "SELECT count(*) FROM glob('runs/*/*/*')",
    "SELECT * FROM range(3)",
    "SELECT unnest([1, 2])",
    "SELECT * FROM duckdb_settings() WHERE name = 'lock_configuration'",
    "UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v",
])
def test_plain_reads_run(project: Path, sql: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    before = snapshot(project)
    assert evalkit.connect("runs").sql(sql).fetchall()
    assert snapshot(project) == before


def test_settings_hold(project: Path) -> None:
    con = evalkit.connect(str(project / "runs"))
    settings = dict(con.sql(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ('temp_directory', "
        "'enable_external_access', 'lock_configuration', 'autoload_known_extensions', "
        "'autoinstall_known_extensions', 'allow_community_extensions', "
        "'allow_persistent_secrets', 'python_enable_replacements')").fetchall())
    assert settings == {"temp_directory": "", "enable_external_access": "false",
                        "lock_configuration": "true", "autoload_known_extensions": "false",
                        "autoinstall_known_extensions": "false",
                        "allow_community_extensions": "false",
                        "allow_persistent_secrets": "false",
                        "python_enable_replacements": "false"}


def test_results_are_data_not_relations(project: Path) -> None:
    result = evalkit.connect(str(project / "runs")).sql("SELECT * FROM metrics WHERE value > ?",
                                                         [0.1])
    assert result.columns == ["run_id", "metric", "slice", "value"]
    assert not hasattr(result, "to_parquet") and not hasattr(result, "query")
    assert result.arrow().num_rows == 1


def test_a_run_folder_linked_from_elsewhere_is_a_one_line_error(tmp_path: Path) -> None:
    real = tmp_path / "disk" / "exp" / "r1"
    real.mkdir(parents=True)
    pq.write_table(pa.table({"run_id": ["r1"], "metric": ["m"]}), real / "metrics.parquet")
    (real / "manifest.json").write_text('{"run_id": "r1", "experiment": "exp", "status": "ok"}')
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "exp").symlink_to(real.parent, target_is_directory=True)
    with pytest.raises(QueryError, match="leads outside the runs directory") as err:
        evalkit.connect(str(tmp_path / "runs"))
    assert len(str(err.value).splitlines()) == 1
    # the runs directory itself may be a link
    (tmp_path / "linked").symlink_to(tmp_path / "disk", target_is_directory=True)
    assert evalkit.connect(str(tmp_path / "linked")).sql(
        "SELECT metric FROM metrics").fetchall() == [("m",)]
