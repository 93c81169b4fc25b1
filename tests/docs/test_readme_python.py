"""The README's Python lines work as written after `make quickstart` (which installs pandas
for ``Run.df``), and a refused statement from Python names no command-line option."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import evalkit
from evalkit.errors import QueryError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_the_readme_python_block_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"In Python:\n\n```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 (the docs' own code)
    assert namespace["run"].query("SELECT count(*) AS n FROM owners",
                                  owners=namespace["owners"]).column("n")[0].as_py() > 0
    with pytest.raises(QueryError) as err:
        evalkit.connect("runs").sql("CREATE TABLE t AS SELECT 1")
    assert "only SELECT" in str(err.value) and "--format" not in str(err.value)
    assert "\n" not in str(err.value)
