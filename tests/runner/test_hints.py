"""Mistakes that look like data are said at once: a source field mapped to a path no record
has (a typo) warns, naming the closest key the records do have."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, run_dirs


def test_a_field_mapped_to_a_missing_path_warns(tmp_path: Path) -> None:
    rows = [{"prompt": f"Summarize item {i}", "response": {"text": f"Item {i} in short."}}
            for i in range(5)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["run", "source=jsonl", "source.path=d.jsonl", "source.fields.input=prompt",
            "judges=[prompt_echo]", "runner.summary=false"]
    proc = run_cli(*base, "source.fields.output=respnse.text", cwd=tmp_path)
    assert ("evalkit: warning: source.fields.output: 'respnse.text' matched nothing in the "
            "first 5 records; did you mean 'response'?") in proc.stderr
    (run,) = run_dirs(tmp_path, "default")
    assert json.loads((run / "manifest.json").read_text())["warnings"] == [
        "source.fields.output: 'respnse.text' matched nothing in the first 5 records; "
        "did you mean 'response'?"]
    proc = run_cli(*base, "source.fields.output=response.text", cwd=tmp_path)
    assert "warning" not in proc.stderr
