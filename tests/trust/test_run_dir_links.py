"""A run directory someone hands you is input: nothing in it may make evalkit read a file
outside it. A table that is a symbolic link out of the run, or a metric row whose name is a
path (the report reads ``review/<metric>.parquet``), was followed by ``evalkit report`` (and
``push``, which reads through the same connection), and what it read was embedded in
``report.html``, ``report.md`` and ``report.junit.xml``: a page one shares in CI."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from evalkit.errors import EvalkitError
from tests.conftest import quickstart_run

SECRET = "OUTSIDE-THE-RUN-4f1c"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished quickstart run, and a directory outside it holding Parquet files shaped
    like the run's tables with SECRET in every text cell."""
    root = tmp_path_factory.mktemp("links")
    run = quickstart_run(root, "base")
    outside = root / "outside"
    outside.mkdir()
    for name, source in (("records", run / "records.parquet"),
                         ("judgments", sorted((run / "judgments").glob("part-*.parquet"))[0])):
        table = pq.read_table(source)
        for i, f in enumerate(table.schema):
            if pa.types.is_string(f.type) and f.name not in ("run_id", "status", "judge"):
                table = table.set_column(i, f, pa.array([SECRET] * table.num_rows))
        pq.write_table(table, outside / f"{name}.parquet")
    review = pa.table({"record_id": [SECRET], "a_judge": ["a"], "b_judge": ["b"],
                       "a_score": [1.0], "b_score": [0.0], "difference": [1.0],
                       "output": [SECRET]})
    pq.write_table(review, outside / "review.parquet")
    return run, outside


def _copy(made: tuple[Path, Path], name: str) -> Path:
    run, _ = made
    target = run.parent / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(run, target)
    return target


def _link_records(run: Path, outside: Path) -> None:
    (run / "records.parquet").unlink()
    (run / "records.parquet").symlink_to(outside / "records.parquet")


def _link_judgments(run: Path, outside: Path) -> None:
    part = sorted((run / "judgments").glob("part-*.parquet"))[0]
    part.unlink()
    part.symlink_to(outside / "judgments.parquet")


def _review_named(name: Callable[[Path], str]) -> Callable[[Path, Path], None]:
    def damage(run: Path, outside: Path) -> None:
        table = pq.read_table(run / "metrics.parquet")
        row = {**table.slice(0, 1).to_pylist()[0], "plugin": "disagreements", "slice": "all",
               "metric": name(outside)}
        pq.write_table(pa.concat_tables([table, pa.Table.from_pylist([row], table.schema)]),
                       run / "metrics.parquet")
        (run / "review").mkdir(exist_ok=True)  # (a relative path walks through it)
    return damage


def _review_linked(run: Path, outside: Path) -> None:
    _review_named(lambda _: "queue")(run, outside)
    (run / "review" / "queue.parquet").symlink_to(outside / "review.parquet")


DAMAGES = {
    "records linked out": _link_records,
    "a judgments part linked out": _link_judgments,
    "a metric named by a relative path": _review_named(
        lambda o: "../../../../outside/review"),
    "a metric named by an absolute path": _review_named(lambda o: str(o / "review")),
    "a review queue linked out": _review_linked,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_report_reads_nothing_outside_the_run(made: tuple[Path, Path], damage: str,
                                                capsys: pytest.CaptureFixture) -> None:
    from evalkit.report import write_report

    run = _copy(made, "hostile")
    DAMAGES[damage](run, made[1])
    out = run.parent / "hostile-report"
    try:
        write_report([run], out)
    except EvalkitError as exc:  # refusing the run is fine, in one line naming the file
        assert "\n" not in str(exc) and "outside" in str(exc), str(exc)
    written = [p.read_text() for p in out.glob("*")] if out.exists() else []
    said = capsys.readouterr()
    assert not any(SECRET in text for text in written), damage
    assert SECRET not in said.out + said.err


def test_a_connection_to_a_run_reads_only_the_run(made: tuple[Path, Path]) -> None:
    """What the report, the sinks (``push``) and label sampling read a run through."""
    import duckdb

    from evalkit.results.writer import run_connection

    con = run_connection(made[0])  # a run's own files read as before
    assert con.execute("SELECT count(*) FROM judgments").fetchone()[0] > 0
    with pytest.raises(duckdb.PermissionException):  # and nothing else
        con.execute(f"SELECT * FROM read_parquet('{made[1] / 'review.parquet'}')")
    con.close()
    run = _copy(made, "linked")
    _link_records(run, made[1])
    with pytest.raises(EvalkitError, match="leads outside the run directory") as caught:
        run_connection(run)
    assert "\n" not in str(caught.value)
