"""`evalkit init`: a starter ./conf over the user's JSONL file that runs at once, and a
plugin package that passes its own tests (evalkit's conformance suite included) at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli, run_dirs

ROWS = [
    {"prompt": "Summarize: the build is red since Tuesday", "response": "Build broken.",
     "model": "a"},
    {"prompt": "Summarize: the build is red since Tuesday",
     "response": "Summarize: the build is red since Tuesday", "model": "b"},
    {"prompt": "Translate: good morning", "response": None, "level": "ERROR", "model": "a"},
]


def test_init_writes_a_starter_conf_over_the_users_file(tmp_path: Path) -> None:
    (tmp_path / "gen.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = run_cli("init", "gen.jsonl", cwd=tmp_path).stdout
    assert "wrote conf/experiment/starter.yaml" in out
    assert "next: evalkit run +experiment=starter" in out
    text = (tmp_path / "conf" / "experiment" / "starter.yaml").read_text()
    assert "output: response" in text and "input: prompt" in text  # mapped from its keys
    run_cli("run", "+experiment=starter", "runner.summary=false", cwd=tmp_path)
    (run,) = run_dirs(tmp_path, "starter")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["n_records"] == 3 and manifest["excluded_by"] == {"pipeline_failure": 1}
    assert manifest["judgments"]["prompt_echo"] == {"ok": 2, "skipped": 1}
    # the judge preset it wrote works too
    # (no metrics, so no alert: one on a metric the run cannot produce is a config error)
    run_cli("run", "+experiment=starter", "judges=[strict_echo]", "metrics=[]", "alerts=[]",
            "runner.summary=false", cwd=tmp_path)
    # nothing is overwritten without --force
    proc = run_cli("init", "gen.jsonl", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "already exist" in proc.stderr and "--force" in proc.stderr
    run_cli("init", "gen.jsonl", "--force", cwd=tmp_path)


def test_init_without_data_uses_the_bundled_sample(tmp_path: Path) -> None:
    run_cli("init", "--name", "mine", cwd=tmp_path)
    run_cli("run", "+experiment=mine", "runner.summary=false", cwd=tmp_path)
    (run,) = run_dirs(tmp_path, "mine")
    assert json.loads((run / "manifest.json").read_text())["n_records"] == 160
    proc = run_cli("init", "missing.jsonl", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "no file at 'missing.jsonl'" in proc.stderr


def test_init_plugin_writes_a_package_that_passes_its_own_tests(tmp_path: Path) -> None:
    out = run_cli("init", "plugin", "todo_words", cwd=tmp_path).stdout
    root = tmp_path / "evalkit-todo-words"
    for rel in ("pyproject.toml", "README.md", "src/evalkit_todo_words/__init__.py",
                "tests/test_todo_words.py", "conf/judges/todo_words.yaml"):
        assert (root / rel).is_file(), rel
    assert f"cd {root.relative_to(tmp_path)}" in out
    import tomllib  # Python 3.11+, as the project's CI

    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["evalkit.judges"] == {
        "todo_words": "evalkit_todo_words:TodoWordsJudge"}
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
    proc = run_cli("init", "plugin", "Bad-Name", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "snake_case" in proc.stderr


def test_init_plugin_names_classes_plainly_and_calls_the_base_constructor() -> None:
    from evalkit.commands.init import plugin_files

    files = plugin_files("my_judge")
    source = files["evalkit-my-judge/src/evalkit_my_judge/__init__.py"]
    assert "class MyJudge(Judge)" in source and "MyJudgeJudge" not in source
    namespace: dict = {}
    exec(compile(source, "generated", "exec"), namespace)  # the module as a user gets it
    cls = namespace["MyJudge"]
    judge = cls("mine", cls.Config(), ctx=None)
    assert (judge.name, judge.ctx) == ("mine", None)  # the base class's __init__ ran
    # the README's run keeps the quickstart's own judge, which its alert needs
    assert "'judges=[prompt_echo,my_judge]'" in files["evalkit-my-judge/README.md"]
