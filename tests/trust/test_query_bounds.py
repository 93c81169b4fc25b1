"""Every query (``evalkit query``, ``evalkit.connect``, config SQL) has a memory limit and a
time limit: a runaway query ends with one line, exit 2, soon."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import evalkit
from evalkit.errors import QueryError
from evalkit.filters.sql import SqlConfig, SqlFilter
from tests.filters.conftest import make_batch

ENDLESS = [
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t",
    "SELECT count(*) FROM range(1000000000000)",
]
GREEDY = [
    "SELECT length(string_agg(repeat('x', 1000), ',')) FROM range(10000000)",
    "WITH RECURSIVE t(n, s) AS (SELECT 1, 'x' UNION ALL SELECT n + 1, s || s FROM t "
    "WHERE n < 60) SELECT max(length(s)) FROM t",
]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs"


@pytest.mark.parametrize("sql", ENDLESS)
def test_a_query_stops_at_its_time_limit(runs: Path, sql: str) -> None:
    con = evalkit.connect(str(runs), timeout=1)
    t0 = time.monotonic()
    with pytest.raises(QueryError, match=r"^query: stopped after 1 s, the query time limit"):
        con.sql(sql).fetchall()
    assert time.monotonic() - t0 < 15


@pytest.mark.parametrize("sql", GREEDY)
def test_a_query_stops_at_its_memory_limit(runs: Path, sql: str) -> None:
    con = evalkit.connect(str(runs), memory_limit="200MB", timeout=60)
    with pytest.raises(QueryError, match=r"^query: the query needs more than its memory "
                                         r"limit \(200MB\)") as caught:
        con.sql(sql).fetchall()
    assert "\n" not in str(caught.value)


def test_the_defaults_are_bounded_and_settings_checked(runs: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    con = evalkit.connect(str(runs))
    (limit,) = con.sql("SELECT current_setting('memory_limit')").fetchone()
    number, unit = limit.split()
    assert float(number) * {"MiB": 1 << 20, "GiB": 1 << 30}[unit] <= 4 << 30
    for bad in ("lots", "-1GB", ""):
        with pytest.raises(QueryError, match="memory_limit: .* not an amount of memory"):
            evalkit.connect(str(runs), memory_limit=bad or " ")
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(QueryError, match="timeout: .* not a number of seconds"):
            evalkit.connect(str(runs), timeout=bad)
    monkeypatch.setenv("EVALKIT_QUERY_TIMEOUT", "soon")
    with pytest.raises(QueryError, match="EVALKIT_QUERY_TIMEOUT: 'soon'"):
        evalkit.connect(str(runs))
    monkeypatch.setenv("EVALKIT_QUERY_TIMEOUT", "1")
    monkeypatch.setenv("EVALKIT_QUERY_MEMORY_LIMIT", "300MB")
    con = evalkit.connect(str(runs))
    assert con.sql("SELECT current_setting('memory_limit')").fetchone()[0].startswith("286")
    with pytest.raises(QueryError, match="stopped after 1 s"):
        con.sql(ENDLESS[1]).fetchall()


def test_config_sql_has_the_same_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALKIT_QUERY_TIMEOUT", "1")
    f = SqlFilter("slow", SqlConfig(where="(SELECT count(*) FROM range(1000000000000)) > 0"),
                  None)
    with pytest.raises(QueryError, match=r"^filters\.slow\.where: stopped after 1 s"):
        f.mark(make_batch([{"latency_s": 1.0}]))
    monkeypatch.setenv("EVALKIT_QUERY_TIMEOUT", "60")
    monkeypatch.setenv("EVALKIT_QUERY_MEMORY_LIMIT", "200MB")
    f = SqlFilter("big", SqlConfig(where=f"({GREEDY[0]}) > 0"),
                  None)
    with pytest.raises(QueryError, match=r"^filters\.big\.where: the query needs more"):
        f.mark(make_batch([{"latency_s": 1.0}]))


@pytest.mark.e2e
def test_the_cli_says_so_in_one_line(runs: Path) -> None:
    from tests.conftest import run_cli

    proc = run_cli("query", "--timeout", "1", ENDLESS[0], cwd=runs.parent, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("evalkit: error: query: stopped after 1 s")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("query", "--memory-limit", "lots", "SELECT 1", cwd=runs.parent, check=False)
    assert proc.returncode == 2 and "not an amount of memory" in proc.stderr


def test_a_query_leaves_no_timer_holding_its_connection(runs: Path) -> None:
    # a timer thread still alive at exit holds the connection it watches: DuckDB torn down
    # from there ended `evalkit query` with std::terminate (exit -6) under load
    # (duckdb/duckdb#13904)
    import threading

    con = evalkit.connect(str(runs))
    for _ in range(20):
        con.sql("SELECT 1").fetchall()
        assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]


# A result within DuckDB's memory limit became every row as a Python tuple before a line was
# printed: 10 million integers took 0.9 GB to show 50 of them, 200 million would exhaust a
# 23 GB machine. The rows are now read in chunks: what is printed or written is streamed.
@pytest.mark.e2e
@pytest.mark.parametrize("rows, args, budget", [
    (10_000_000, [], 300 << 20),
    (3_000_000, ["--out", "big.csv"], 220 << 20),
])
def test_a_large_result_is_streamed_not_held(runs: Path, rows: int, args: list[str],
                                             budget: int) -> None:
    import sys

    from tests.reliability.procmem import run_measured

    evalkit_bin = str(Path(sys.executable).with_name("evalkit"))
    proc, peak = run_measured([evalkit_bin, "query", f"SELECT i FROM range({rows}) r(i)",
                               "--runs-dir", str(runs), *args], cwd=runs.parent)
    assert proc.returncode == 0, proc.stderr
    if args:
        assert proc.stderr.strip() == f"wrote {rows} rows to big.csv"
        with (runs.parent / "big.csv").open() as fh:
            assert sum(1 for _ in fh) == rows + 1
    else:
        assert proc.stdout.rstrip().endswith(
            f"{rows} rows ({rows - 50} not shown; --max-rows N, or --format csv|json)")
    assert peak < budget, f"{peak >> 20} MB"


# DuckDB's memory_limit bounds its buffer manager, not what one function allocates for one
# value: with --memory-limit 256MB, repeat('x', 1.5e9) took 3 GB and len(range(4e8)) 20 GB
# (63 s; an interrupt waits until the function returns). evalkit query's process is its own,
# so its data segment is capped near the limit: such an allocation fails at once in DuckDB.
@pytest.mark.e2e
@pytest.mark.parametrize("sql", ["SELECT length(repeat('x', 1500000000))",
                                 "SELECT len(range(150000000))"])
def test_one_huge_value_stops_at_the_memory_limit(runs: Path, sql: str) -> None:
    import sys

    from tests.reliability.procmem import run_measured

    evalkit_bin = str(Path(sys.executable).with_name("evalkit"))
    proc, peak = run_measured([evalkit_bin, "query", sql, "--runs-dir", str(runs),
                               "--memory-limit", "256MB"], cwd=runs.parent, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("evalkit: error: query: the query needs more than its "
                                  "memory limit (256MB)"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert peak < 1 << 30, f"{peak >> 20} MB"
