"""state_check against real DuckDB and SQLite files: verdicts, parameters, errors."""

from __future__ import annotations

import sqlite3

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.errors import ConfigError
from evalkit.judges.state_check import StateCheckConfig, StateCheckJudge

QUERY = ("SELECT count(*) > 0 FROM bookings WHERE session_id = $session_id "
         "AND ref = $ref")


@pytest.fixture(params=["duckdb", "sqlite"])
def database(request, tmp_path):
    if request.param == "duckdb":
        path = tmp_path / "state.duckdb"
        con = duckdb.connect(str(path))
    else:
        path = tmp_path / "state.sqlite"
        con = sqlite3.connect(path)
    con.execute("CREATE TABLE bookings (session_id VARCHAR, ref VARCHAR)")
    con.execute("INSERT INTO bookings VALUES ('s1', 'A1')")
    con.commit()
    con.close()
    return path


BATCH = pa.table({"record_id": ["booked", "claimed", "no_session"],
                  "session_id": ["s1", "s2", None],
                  "output": ["Booked!", "I've booked your flight.", "Done."],
                  "metadata": ['{"booking": {"ref": "A1"}}', '{"booking": {"ref": "B7"}}',
                               None]})


def judge(database, **kw):
    cfg = StateCheckConfig(**{"database": str(database), "query": QUERY,
                              "params": {"ref": "metadata.booking.ref"}, **kw})
    cfg.validate()
    return StateCheckJudge("booking", cfg, None)


def test_verdicts_per_record(database):
    j = judge(database)
    rows = {r["record_id"]: r for r in j.judge(BATCH)}
    j.close()
    assert rows["booked"]["passed"] is True and rows["booked"]["value"] == 1.0
    # "I've booked your flight" with no booking is a failure
    assert rows["claimed"]["passed"] is False and rows["claimed"]["label"] == "state_missing"
    assert rows["no_session"]["status"] == "ok" and rows["no_session"]["passed"] is False
    assert j.engine == database.suffix.lstrip(".")


def test_no_row_null_and_sql_errors(database):
    none = judge(database, query="SELECT 1 FROM bookings WHERE session_id = $session_id")
    rows = none.judge(BATCH)
    assert rows[0]["passed"] is True
    assert rows[1]["passed"] is False and "no row" in rows[1]["explanation"]
    null = judge(database, query="SELECT NULL")
    assert null.judge(BATCH)[0]["status"] == "error"
    bad = judge(database, query="SELECT missing_column FROM bookings")
    row = bad.judge(BATCH)[0]
    assert row["status"] == "error" and "missing_column" in row["error"]


def test_the_database_is_opened_read_only(database):
    # refused before anything runs: by DuckDB's parser when the config loads, by SQLite's
    # authorizer when the statement is prepared
    with pytest.raises((ValueError, ConfigError), match="refused"):
        judge(database, query="INSERT INTO bookings VALUES ('x', 'y') RETURNING 1").judge(BATCH)
    check = judge(database, query="SELECT count(*) = 1 FROM bookings")
    assert check.judge(BATCH)[0]["passed"] is True


def test_config_and_file_errors(tmp_path, database):
    with pytest.raises(ValueError, match=r"\$booking_ref"):
        StateCheckConfig(database="x", query="SELECT $booking_ref").validate()
    with pytest.raises(ValueError, match="params.ref"):
        StateCheckConfig(database="x", query="SELECT $ref", params={"ref": "nope.x"}).validate()
    with pytest.raises(ValueError, match="engine"):
        StateCheckConfig(database="x", query="SELECT 1", engine="postgres").validate()
    with pytest.raises(ConfigError, match="no file"):
        StateCheckJudge("s", StateCheckConfig(database=str(tmp_path / "none.db"),
                                              query="SELECT 1"), None)
    text = tmp_path / "notes.txt"
    text.write_text("hello, not a database")
    with pytest.raises(ConfigError, match="neither a SQLite nor a DuckDB"):
        StateCheckJudge("s", StateCheckConfig(database=str(text), query="SELECT 1"), None)


def test_task_completion_from_state_checks_through_the_cli(tmp_path):
    """A user experiment: the state_check judge feeds task_completion, so a claimed booking
    with no row in the database counts as a failure."""
    import json

    from tests.conftest import run_cli, run_dirs

    db = tmp_path / "app.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE bookings (session_id TEXT)")
    con.executemany("INSERT INTO bookings VALUES (?)", [("s1",), ("s3",)])
    con.commit()
    con.close()
    lines = [{"id": f"t{i}", "session_id": f"s{i}", "model": "m",
              "output": "I've booked your flight."} for i in range(1, 5)]
    (tmp_path / "turns.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "booking.yaml").write_text(f"""# @package _global_
defaults:
  - override /source: jsonl
experiment: booking
source:
  path: turns.jsonl
  record_id: id
judges:
  booked:
    plugin: state_check
    database: {db}
    query: SELECT count(*) > 0 FROM bookings WHERE session_id = $session_id
metrics:
  completion:
    plugin: task_completion
    outcome: judge:booked:passed
""")
    run_cli("run", "+experiment=booking", "runner.summary=false", cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path, "booking")
    metrics = pq.read_table(run_dir / "metrics.parquet").to_pylist()
    row = next(m for m in metrics if m["metric"] == "completion" and m["slice"] == "all")
    assert row["value"] == 0.5 and row["n_judged"] == 4
