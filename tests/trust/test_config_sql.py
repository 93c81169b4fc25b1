"""Every SQL text from a config runs in the query layer's sandbox: the ``sql`` filter's
predicate, ``state_check``'s query and a plugin's SQL (``evalkit.plugin.ConfigSql``). Each
attack must be refused (a config error, or at worst an error judgment, never a verdict) and
leave the working directory as it was."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from evalkit.config import validate_dataclass
from evalkit.errors import ConfigError, EvalkitError, QueryError
from evalkit.filters.sql import SqlConfig, SqlFilter
from evalkit.judges.state_check import StateCheckConfig, StateCheckJudge
from evalkit.plugin import ConfigSql
from tests.filters.conftest import make_batch

ISSUE = ("1=1), false) THEN 'x' END AS reason FROM records; COPY (SELECT 'owned' AS x) TO "
         "'pwned.csv'; SELECT CASE WHEN coalesce((1=1")

PREDICATES = [
    ISSUE,
    "1=1; COPY (SELECT 1) TO 'pwned.csv'",
    "1=1) FROM records; COPY (SELECT 1) TO 'pwned.csv'; --",
    "1=1 /* x */ ; COPY (SELECT 1) TO 'pwned.csv'",
    "1=1 --\n; COPY (SELECT 1) TO 'pwned.csv'",
    "(SELECT count(*) FROM read_csv('/etc/passwd')) > 0",
    "(SELECT count(*) FROM read_text('/etc/hostname')) > 0",
    "(SELECT count(*) FROM query('SELECT 1')) > 0",
    "(SELECT count(*) FROM glob('/etc/*')) > 0",
    "1=1; ATTACH 'pwned.duckdb' AS p",
    "1=1; INSTALL httpfs",
    "1=1; LOAD httpfs",
    "1=1; SET enable_external_access = true",
    "1=1; PRAGMA enable_profiling",
    "1=1; CREATE TABLE pwned AS SELECT 1",
    "1 FROM records",
    "latency_s > 1, model = 'x'",
    "latency_s > 1 ORDER BY 1",
    "latency_s > 1\x00; COPY (SELECT 1) TO 'pwned.csv'",
    "getenv('HOME') IS NOT NULL",
]


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("where", PREDICATES)
def test_a_filter_predicate_is_one_sandboxed_expression(where: str, cwd: Path) -> None:
    with pytest.raises(ConfigError, match=r"^filters\.evil\.where: ") as caught:
        validate_dataclass(SqlConfig, {"where": where}, "filters.evil", "filter plugin 'sql'")
    assert "\n" not in str(caught.value)
    # and run anyway (a plugin's validate skipped): refused the same, nothing written
    f = SqlFilter("evil", SqlConfig(where=where), None)
    with pytest.raises(QueryError, match=r"^filters\.evil\.where: "):
        f.mark(make_batch([{"latency_s": 2.0}]))
    assert list(cwd.iterdir()) == []


def test_plain_predicates_still_work(cwd: Path) -> None:
    for where in ("latency_s > 1", "model LIKE 'gpt%' -- a comment",
                  "latency_s > (SELECT avg(latency_s) FROM records)",
                  "regexp_matches(model, '^g')", "model IN ('a', 'gpt')"):
        validate_dataclass(SqlConfig, {"where": where}, "filters.ok", "filter plugin 'sql'")
    f = SqlFilter("slow", SqlConfig(where="latency_s > (SELECT avg(latency_s) FROM records)"),
                  None)
    marks = f.mark(make_batch([{"latency_s": 1.0}, {"latency_s": 3.0}])).to_pylist()
    assert marks == [None, "matches latency_s > (SELECT avg(latency_s) FROM records)"]


@pytest.fixture(params=["duckdb", "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "db" / f"state.{request.param}"
    path.parent.mkdir()
    con = duckdb.connect(str(path)) if request.param == "duckdb" else sqlite3.connect(path)
    con.execute("CREATE TABLE bookings (session_id VARCHAR, ref VARCHAR)")
    con.execute("INSERT INTO bookings VALUES ('s1', 'A1')")
    con.commit()
    con.close()
    return path


QUERIES = [
    "COPY (SELECT 'owned' AS x) TO 'pwned.csv'",
    "SELECT 1; COPY (SELECT 'owned' AS x) TO 'pwned.csv'",
    "SELECT 1 -- x\n; COPY (SELECT 1) TO 'pwned.csv'",
    "SELECT 1 /* ; */ ; CREATE TABLE pwned AS SELECT 1",
    "ATTACH 'pwned.db' AS p",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "PRAGMA writable_schema = 1",
    "INSERT INTO bookings VALUES ('x', 'y') RETURNING 1",
    "DELETE FROM bookings RETURNING 1",
    "CREATE TABLE pwned AS SELECT 1",
    "SELECT count(*) FROM query('SELECT 1')",
    "SELECT load_extension('pwned')",
]


@pytest.mark.parametrize("query", QUERIES)
def test_state_check_runs_one_read_only_select(database: Path, query: str, cwd: Path) -> None:
    before = database.read_bytes()
    batch = pa.table({"record_id": ["r1"], "session_id": ["s1"]})
    try:
        config = validate_dataclass(StateCheckConfig, {"database": str(database),
                                                       "query": query}, "judges.booked",
                                    "judge plugin 'state_check'")
        judge = StateCheckJudge("booked", config, None)
        rows = judge.judge(batch)
        judge.close()
    except EvalkitError as exc:
        assert str(exc).startswith("judges.booked.query: ") and "\n" not in str(exc)
    else:  # (SQLite reports a function it does not have when it runs: an error, no verdict)
        assert rows[0]["status"] == "error", rows
    assert list(cwd.iterdir()) == [database.parent]
    assert database.read_bytes() == before


@pytest.mark.parametrize("path", ["/etc/passwd", "{other}"])
def test_state_check_reads_its_database_only(database: Path, path: str, cwd: Path) -> None:
    other = cwd / "other.csv"
    other.write_text("a\n1\n")
    path = path.format(other=other)
    query = f"SELECT count(*) > 0 FROM read_csv('{path}')"
    if database.suffix == ".sqlite":
        query = f"SELECT count(*) > 0 FROM pragma_table_info('{path}')"
    config = StateCheckConfig(database=str(database), query=query)
    config.validate()
    judge = StateCheckJudge("booked", config, None)
    try:
        rows = judge.judge(pa.table({"record_id": ["r1"]}))
    except EvalkitError as exc:
        assert "refused" in str(exc)
    else:
        assert rows[0]["status"] == "error" and "passed" not in rows[0], rows


def test_a_plugins_sql_goes_through_the_same_sandbox(cwd: Path) -> None:
    sql = ConfigSql("judges.mine.query")
    sql.register("records", pa.table({"x": [1, 2]}))
    assert sql.sql("SELECT sum(x) FROM records WHERE x > $n", {"n": 0}).fetchone() == (3,)
    for bad in ("COPY records TO 'pwned.csv'", "SELECT 1; SELECT 2",
                "SELECT * FROM read_csv('/etc/passwd')", "EXPLAIN ANALYZE SELECT 1",
                "SELECT current_setting('lock_configuration')::INT + 1 FROM records; SET x=1"):
        with pytest.raises(QueryError, match=r"^judges\.mine\.query: "):
            sql.sql(bad)
    with pytest.raises(QueryError, match="not a name for a view"):
        sql.register('x" AS SELECT 1; --', pa.table({"x": [1]}))
    sql.close()
    assert list(cwd.iterdir()) == []


@pytest.mark.e2e
def test_cfg_job_and_dry_run_execute_nothing(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit
    from tests.conftest import run_cli

    proc = run_cli("run", "+experiment=quickstart", "+filters.evil.plugin=sql",
                   f'+filters.evil.where="{ISSUE}"', "--cfg", "job", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("evalkit: error: filters.evil.where: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^filters\.evil\.where: "):
        evalkit.run("quickstart", ["+filters.evil.plugin=sql",
                                   f'+filters.evil.where="{ISSUE}"', "runner.dry_run=true"])
    assert not (tmp_path / "pwned.csv").exists()
    assert not os.path.exists(tmp_path / "runs")


@pytest.mark.parametrize("column", [
    'metadata.a" FROM records; COPY (SELECT 1) TO \'pwned.csv\'; SELECT 1 AS "b',
    'metadata.a"b', "metadata.a\\b", "metadata.a\x00b", "metadata.a\nb"])
def test_a_slice_column_is_a_name_never_sql(column: str, cwd: Path) -> None:
    from evalkit.metrics.rate import RateConfig

    with pytest.raises(ConfigError, match=r"^metrics\.r\.slice_by: "):
        validate_dataclass(RateConfig, {"judge": "j", "slice_by": [column]}, "metrics.r",
                           "metric plugin 'rate'")
    assert list(cwd.iterdir()) == []


def test_a_metadata_key_with_quotes_is_still_sliced(cwd: Path) -> None:
    from evalkit.metrics._stats import slice_sql

    con = duckdb.connect()
    con.execute("CREATE TABLE records AS SELECT '{\"it''s\": \"x\"}' AS metadata")
    sql = slice_sql("metadata.it's")
    assert con.execute(f"SELECT {sql} FROM records").fetchall() == [("x",)]


# SQLite has no memory limit of its own: one value could be 1 GB (its compiled maximum), and
# a state_check query took 2 GB whatever EVALKIT_QUERY_MEMORY_LIMIT said. Its values are now
# capped at a quarter of the limit, and a larger one is the limit's one line.
@pytest.mark.parametrize("query", ["SELECT length(hex(zeroblob(400000000))) > 0",
                                   "SELECT length(replace(hex(zeroblob(60000000)), '0', "
                                   "'xx')) > 0"])
def test_a_sqlite_value_stays_within_the_memory_limit(tmp_path: Path, query: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_QUERY_MEMORY_LIMIT", "256MB")
    path = tmp_path / "state.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE bookings (ref TEXT)")
    con.commit()
    con.close()
    judge = StateCheckJudge("booked", StateCheckConfig(database=str(path), query=query), None)
    t0 = time.monotonic()
    (row,) = judge.judge(pa.table({"record_id": ["r1"]}))  # (the record's error, as a timeout)
    judge.close()
    assert row["status"] == "error" and row["error"].startswith(
        "judges.booked.query: the query needs more than its memory limit (256MB)"), row
    assert time.monotonic() - t0 < 1.5  # (it took 2 s and 2 GB to answer)
