"""The CSV source: header mapping, JSON cells walked by dotted paths, empty cells as null,
and bad rows as rejects."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.context import RunContext
from evalkit.sources.csv import CsvSource
from evalkit.sources.files import FileSourceConfig
from tests.sources.conftest import read


def test_csv_mapping_and_rejects(tmp_path: Path, ctx: RunContext) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(
        b'id,model,response,latency_s,context\n'
        b'1,m1,"{""text"": ""hello, world""}",0.25,"[""p1"", ""p2""]"\n'
        b'2,m2,,oops,\n'
        b'3,m3,"{""text"": ""x""}"\n'
        b'4,m\xff,"{""text"": ""y""}",1,\n'
        b'5,,"{""text"": ""z""}",2,plain passage\n'
    )
    cfg = FileSourceConfig(path=str(path), record_id="id", fields={"output": "response.text"})
    got = read(CsvSource("c", cfg, ctx))
    rows = got.table.to_pylist()
    assert [r["record_id"] for r in rows] == ["1", "5"]
    assert rows[0]["output"] == "hello, world" and rows[0]["latency_s"] == 0.25
    assert rows[0]["context"] == ["p1", "p2"] and rows[1]["context"] == ["plain passage"]
    assert rows[1]["model"] is None
    reasons = {r["location"].rsplit(":", 1)[1]: r["reason"] for r in got.reject_rows}
    assert "expected a number" in reasons["3"]
    assert "expected 5 cells" in reasons["4"]
    assert reasons["5"].startswith("not UTF-8")


def test_responses_output_items_as_json_text_read_as_the_assistants_text(
        tmp_path: Path, ctx: RunContext) -> None:
    """OpenAI Responses' output items (a reasoning item, then the message) in a CSV cell are
    JSON text: read as the assistant's text, as the same list is read in a JSON Lines file
    and as ``evalkit init`` shows it, never judged as the JSON."""
    import csv
    import json

    from evalkit.commands.init_mapping import propose, sample_rows

    items = [{"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "message", "role": "assistant", "id": "msg_1", "content": [
                 {"type": "output_text", "text": "Rotate it in Settings.", "annotations": []}]}]
    path = tmp_path / "responses.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["id", "prompt", "output"], ["1", "How?", json.dumps(items)]])
    proposed = propose(sample_rows(path)).proposals["output"]
    cfg = FileSourceConfig(path=str(path), record_id="id",
                           fields={"input": "prompt", "output": "output"})
    (row,) = read(CsvSource("c", cfg, ctx)).table.to_pylist()
    assert row["output"] == proposed.example == "Rotate it in Settings."
    assert json.loads(row["metadata"])["output_messages"] == [items[1]]


@pytest.mark.parametrize("name, sep", [("t.tsv", "\t"), ("t.tsv.gz", "\t"), ("eu.csv", ";"),
                                       ("pipes.csv", "|"), ("commas.csv", ",")])
def test_the_delimiter_is_the_files(ctx, tmp_path, name, sep):
    """A .tsv (which `evalkit init` reads and writes `source: csv` for) and a spreadsheet's
    European CSV (;, decimal commas) were read with commas: every row a reject ("expected 1
    cells (the header's), got 3")."""
    import gzip

    text = sep.join(["id", "prompt", "answer"]) + "\n" + "".join(
        sep.join([str(i), f"What is {i}?", f"It is {i}, more or less"]) + "\n"
        for i in range(3)) if sep != "," else \
        'id,prompt,answer\n' + "".join(f'{i},What is {i}?,"It is {i}, more or less"\n'
                                       for i in range(3))
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    got = read(CsvSource("c", FileSourceConfig(path=str(path), fields={"output": "answer"}),
                         ctx))
    assert not got.rejects
    assert got.table.column("output").to_pylist() == [f"It is {i}, more or less"
                                                      for i in range(3)]
