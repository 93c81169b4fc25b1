"""The Python API a notebook uses: run an experiment, open a finished run by id, read its
tables as Arrow (or pandas), join them with the user's own data explicitly, and errors that
say what is wrong instead of empty results."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

import evalkit
from evalkit.errors import ConfigError, EvalkitError, QueryError


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("api")


def test_run_returns_the_finished_run_with_its_tables(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    run = evalkit.run("quickstart", ["judges.prompt_echo.threshold=0.5", "runner.run_id=api1"])
    assert isinstance(run, evalkit.Run)
    assert (run.id, run.experiment, run.status) == ("api1", "quickstart", "ok")
    assert run.records.num_rows == 160
    assert run.judgments.num_rows == 320
    assert run.manifest["config"]["judges"]["prompt_echo"]["threshold"] == 0.5
    echo = {r["slice"]: r["value"] for r in run.metrics.to_pylist() if r["metric"] == "echo_rate"}
    assert 0 < echo["all"] < 1
    assert run.alerts.column("metric").to_pylist() == ["echo_rate"]
    assert run.rejects.num_rows == 0
    assert isinstance(run.table("metrics"), pa.Table)
    with pytest.raises(EvalkitError, match="no table 'metric'"):
        run.table("metric")


def test_open_run_by_id_latest_or_directory(project: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    evalkit.run("quickstart", ["runner.run_id=api2"])
    assert evalkit.open_run("api1").id == "api1"
    assert evalkit.open_run("latest").id == "api2"
    assert evalkit.open_run(str(project / "runs" / "quickstart" / "api1")).id == "api1"
    with pytest.raises(EvalkitError, match="no run 'nope'"):
        evalkit.open_run("nope")
    with pytest.raises(EvalkitError, match="no runs directory"):
        evalkit.open_run("latest", runs_dir=project / "elsewhere")


def test_a_query_joins_the_users_own_data_explicitly(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    run = evalkit.open_run("api1")
    owners = pa.table({"slice": ["all", "model=gpt-4o-mini"], "owner": ["team", "vendor"]})
    got = run.query("SELECT m.slice, o.owner FROM metrics m JOIN owners o USING (slice) "
                    "WHERE m.metric = 'echo_rate' ORDER BY 1", owners=owners)
    assert got.to_pylist() == [{"slice": "all", "owner": "team"},
                               {"slice": "model=gpt-4o-mini", "owner": "vendor"}]
    # the run's views hold that run only; files outside the runs stay unreadable
    assert run.query("SELECT DISTINCT run_id FROM records").column(0).to_pylist() == ["api1"]
    with pytest.raises(QueryError):
        run.query("SELECT * FROM read_csv('/etc/passwd')")


@pytest.mark.parametrize("name", [
    'x" AS SELECT 1; COPY (SELECT 1) TO \'pwned.csv\'; CREATE TABLE "y',
    "a b", "1st", "x;", "", "ünï-code", "a" * 100])
def test_a_view_name_is_an_identifier_never_sql(project: Path, name: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    run = evalkit.open_run("api1")
    before = sorted(p.name for p in project.iterdir())
    with pytest.raises(QueryError, match="not a name for a view"):
        run.query("SELECT 1", **{name: pa.table({"x": [1]})})
    assert sorted(p.name for p in project.iterdir()) == before
    assert run.query("SELECT x FROM Mixed_Case_1", Mixed_Case_1=pa.table({"x": [7]})
                     ).column(0).to_pylist() == [7]


def test_pandas_frames_or_the_install_line(project: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    run = evalkit.open_run("api1")
    frame = run.df("metrics")  # pandas is in the test tools
    assert type(frame).__module__.startswith("pandas")
    assert frame.equals(run.metrics.to_pandas())
    assert list(frame.columns) == run.metrics.column_names and len(frame) > 0
    monkeypatch.setitem(sys.modules, "pandas", None)  # as where pandas is not installed
    with pytest.raises(EvalkitError, match="pip install pandas"):
        run.df("metrics")


def test_connect_to_a_missing_directory_is_an_error(project: Path) -> None:
    with pytest.raises(QueryError, match="no runs directory at"):
        evalkit.connect(str(project / "nope"))
    con = evalkit.connect(str(project / "runs"), run="api1")
    assert con.sql("SELECT DISTINCT run_id FROM metrics").fetchall() == [("api1",)]


def test_run_errors_name_the_problem(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    with pytest.raises(ConfigError, match="experiment/nope"):
        evalkit.run("nope")
    with pytest.raises(ConfigError, match="did you mean 'threshold'"):
        evalkit.run("quickstart", ["judges.prompt_echo.treshold=0.5"])
    # a group's config misspelt: the closest name and what the group has, as on the CLI
    with pytest.raises(ConfigError, match="group source has no config 'jsnl'; did you mean "
                                          "jsonl"):
        evalkit.run("quickstart", ["source=jsnl"])
