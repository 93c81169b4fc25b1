"""docs/plugin-authoring.md is enough to write a judge: the files its code blocks name
(``file=PATH``) are written exactly as they appear, the package is installed as a third
party's would be, and the doc's own command runs a quickstart with the new judge, whose
judgments and metric land in the run; the doc's conformance test passes on it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import run_cli, run_dirs

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "plugin-authoring.md"
BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```$", re.S | re.M)

pytestmark = pytest.mark.e2e


def _files() -> dict[str, str]:
    return {path: body for path, body in BLOCK.findall(DOC.read_text(encoding="utf-8"))}


def test_the_doc_names_the_class_the_registration_the_yaml_and_a_test():
    assert sorted(_files()) == ["conf/judges/word_limit.yaml", "word-limit/pyproject.toml",
                                "word-limit/tests/test_word_limit.py",
                                "word-limit/word_limit/__init__.py"]


def test_a_judge_written_from_the_doc_runs(tmp_path: Path):
    for path, body in _files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body, encoding="utf-8")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site), str(tmp_path / "word-limit")],
                   check=True)
    env = {"PYTHONPATH": str(site)}
    listing = run_cli("plugins", "--kind", "judges", cwd=tmp_path, env=env).stdout
    assert "word_limit" in listing and "word-limit" in listing

    (command,) = re.findall(r"^\$ evalkit (run .*)$", DOC.read_text(encoding="utf-8"), re.M)
    run_cli(*shlex.split(command), cwd=tmp_path, env=env)
    (run,) = run_dirs(tmp_path, "quickstart")
    con = duckdb.connect()
    counts = dict(con.sql(
        f"SELECT status, count(*) FROM '{run}/judgments/*.parquet' WHERE judge = 'word_limit' "
        "GROUP BY status").fetchall())
    records = con.sql(f"SELECT count(*) FROM '{run}/records.parquet'").fetchone()[0]
    assert sum(counts.values()) == records and counts["ok"] > 0 and counts["skipped"] > 0
    (value,) = con.sql(f"SELECT value FROM '{run}/metrics.parquet' WHERE metric = 'too_long' "
                       "AND slice = 'all'").fetchone()
    assert 0.0 < value < 1.0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["versions"]["word-limit"] == "0.1.0"

    bad = run_cli("run", "+experiment=quickstart", "+judges=word_limit",
                  "judges.word_limit.max_word=3", cwd=tmp_path, env=env, check=False)
    assert bad.returncode == 2 and "did you mean 'max_words'" in bad.stderr

    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            str(tmp_path / "word-limit" / "tests")], cwd=tmp_path,
                           env={**os.environ, **env}, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-3000:]
