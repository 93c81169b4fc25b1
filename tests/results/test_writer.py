"""The run writer's own judgment counts (what the manifest and summary report) against DuckDB
reading back the parts it wrote."""

from __future__ import annotations

from pathlib import Path

from evalkit.results.schemas import JUDGMENTS, conform
from evalkit.results.writer import RunWriter, run_connection


def test_judgment_stats_match_the_written_parts(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run")
    parts = [
        [{"record_id": "a", "judge": "j1", "status": "ok", "origin": "computed",
          "judge_model": "m", "cost_usd": 0.5},
         {"record_id": "b", "judge": "j1", "status": "ok", "origin": "computed",
          "judge_model": "m", "cost_usd": None},  # an unpriced call
         {"record_id": "c", "judge": "j1", "status": "error", "origin": "computed",
          "judge_model": "m"},
         {"record_id": "d", "judge": "j2", "status": "ok", "origin": "computed"}],
        [{"record_id": "e", "judge": "j1", "status": "ok", "origin": "cache",
          "judge_model": "m", "cost_usd": 0.125},  # bought by an earlier run, not again
         {"record_id": "f", "judge": "j1", "status": "ok", "origin": "computed",
          "judge_model": "m", "cost_usd": 0.25},
         {"record_id": "g", "judge": "j2", "status": "skipped", "origin": "computed"}],
    ]
    for rows in parts:
        writer.add_judgments(conform(rows, JUDGMENTS, {"run_id": "r"}))
    writer.finish_records()
    con = run_connection(tmp_path / "run")
    expected = con.sql(
        "SELECT judge, status, count(*), sum(cost_usd) FILTER (WHERE origin <> 'cache'), "
        "count(*) FILTER (WHERE cost_usd IS "
        "NULL AND status = 'ok' AND origin = 'computed' AND judge_model IS NOT NULL) "
        "FROM judgments GROUP BY ALL ORDER BY ALL").fetchall()
    got = [(j, s, n, c, u) for (j, s), (n, c, u) in sorted(writer.judgment_stats.items())]
    assert got == expected
    assert got[0] == ("j1", "error", 1, None, 0) and got[1] == ("j1", "ok", 4, 0.75, 1)
    assert writer.judge_spend() == (0.75, 1)


def test_an_unknown_price_is_a_null_spend_never_zero(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run")
    writer.add_judgments(conform([
        {"record_id": "a", "judge": "own", "status": "ok", "origin": "computed",
         "judge_model": "openai/self-hosted", "cost_usd": None}], JUDGMENTS, {"run_id": "r"}))
    assert writer.judge_spend() == (None, 1)
    free = RunWriter(tmp_path / "free")  # deterministic judges made no call: a spend of 0
    free.add_judgments(conform([{"record_id": "a", "judge": "regex", "status": "ok",
                                 "origin": "computed"}], JUDGMENTS, {"run_id": "r"}))
    assert free.judge_spend() == (0.0, 0)


def test_unique_columns_are_written_without_a_dictionary(tmp_path: Path) -> None:
    """record_id and timestamp (one value per record) skip the dictionary the writer would
    build and drop; columns whose values repeat keep it; the values read back unchanged."""
    import pyarrow.parquet as pq

    from evalkit.results.schemas import RECORDS

    writer = RunWriter(tmp_path / "run")
    rows = [{"record_id": f"r{i}", "model": "m1" if i % 2 else "m2", "run_id": "x",
             "timestamp": None} for i in range(1000)]
    records = conform(rows, RECORDS)
    writer.add_records(records)
    writer.finish_records()
    writer.add_judgments(conform([{"record_id": r["record_id"], "judge": "j", "status": "ok",
                                   "origin": "computed"} for r in rows], JUDGMENTS,
                                 {"run_id": "x"}))

    def encodings(path: Path) -> dict[str, set[str]]:
        group = pq.ParquetFile(path).metadata.row_group(0)
        return {group.column(i).path_in_schema: set(group.column(i).encodings)
                for i in range(group.num_columns)}

    rec = encodings(tmp_path / "run" / "records.parquet")
    jud = encodings(next((tmp_path / "run" / "judgments").glob("part-*.parquet")))
    for enc in (rec["record_id"], jud["record_id"], rec["timestamp"]):
        assert not enc & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    for enc in (rec["model"], jud["judge"], jud["status"]):
        assert enc & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    assert pq.read_table(tmp_path / "run" / "records.parquet").equals(records)


def test_free_text_columns_are_written_without_statistics(tmp_path: Path) -> None:
    """Prompts, completions and reasons carry no min/max statistics; ids, models and numbers
    keep theirs (DuckDB skips row groups by them); the values read back unchanged."""
    import pyarrow.parquet as pq

    from evalkit.results.schemas import RECORDS

    writer = RunWriter(tmp_path / "run")
    rows = [{"record_id": f"r{i}", "model": "m", "run_id": "x", "input": f"prompt {i}",
             "output": f"answer {i}", "latency_s": i / 10} for i in range(100)]
    records = conform(rows, RECORDS)
    writer.add_records(records)
    writer.finish_records()
    path = tmp_path / "run" / "records.parquet"
    group = pq.ParquetFile(path).metadata.row_group(0)
    stats = {group.column(i).path_in_schema: group.column(i).statistics
             for i in range(group.num_columns)}
    assert stats["input"] is None and stats["output"] is None
    assert (stats["record_id"].min, stats["record_id"].max) == ("r0", "r99")
    assert (stats["model"].min, stats["latency_s"].max) == ("m", 9.9)
    assert pq.read_table(path).equals(records)
