"""Shell completion as a user installs and uses it, in bash (and zsh when it is installed):
commands, options and their values, config groups and their options, and every key of the
plugin behind an instance."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.commands.completion import candidates
from tests.conftest import run_cli

BIN = str(Path(sys.executable).parent)


def test_candidates_for_commands_options_groups_and_keys(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert candidates("evalkit q") == ["query "]
    assert "completion " in candidates("evalkit ")
    assert candidates("evalkit query x --format js") == ["json ", "jsonl "]
    assert candidates("evalkit plugins prompt_") == ["prompt_echo "]
    assert candidates("evalkit run +exp") == ["+experiment="]
    assert "+experiment=quickstart" in candidates("evalkit run +experiment=")
    assert candidates("evalkit run so") == ["source="]
    assert "source=csv" in candidates("evalkit run source=")
    assert "-m " in candidates("evalkit run -")
    # keys of the plugin behind an instance, including ones its preset does not list
    keys = candidates("evalkit run +experiment=quickstart judges.prompt_echo.")
    assert {"judges.prompt_echo.threshold=", "judges.prompt_echo.ngram="} <= set(keys)
    assert candidates("evalkit run +experiment=quickstart source.rec") == ["source.record_id="]
    assert candidates("evalkit run runner.batch") == ["runner.batch_size="]


def _bash_complete(line: str, cwd: Path) -> list[str]:
    script = run_cli("completion", "bash", cwd=cwd).stdout
    words = line.split(" ")
    program = (f"{script}\nCOMP_LINE={line!r}; COMP_POINT={len(line)}; "
               f"COMP_WORDS=({' '.join(repr(w) for w in words)}); "
               f"COMP_CWORD={len(words) - 1}; _evalkit_complete; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", program], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [ln for ln in done.stdout.splitlines() if ln]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_script_completes(tmp_path: Path) -> None:
    assert _bash_complete("evalkit ru", tmp_path) == ["run "]
    assert _bash_complete("evalkit run +experiment=quick", tmp_path) == [
        "+experiment=quickstart"]
    assert "judges.prompt_echo.threshold=" in _bash_complete(
        "evalkit run +experiment=quickstart judges.prompt_echo.th", tmp_path)


def test_run_sc_install_prints_a_script_that_works(tmp_path: Path) -> None:
    # Hydra's own script called `evalkit -sc query=bash`, which evalkit refused
    for shell in ("bash", "zsh"):
        script = run_cli("run", "-sc", f"install={shell}", cwd=tmp_path).stdout
        assert "evalkit __complete" in script and "complete -o nospace" in script
    env = {"COMP_LINE": "evalkit run +experiment=quick", "COMP_POINT": "29"}
    out = run_cli("__complete", cwd=tmp_path, env=env).stdout
    assert out.splitlines() == ["+experiment=quickstart"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_the_zsh_script_completes(tmp_path: Path) -> None:
    script = run_cli("completion", "zsh", cwd=tmp_path).stdout
    line = "evalkit run +experiment=quick"
    program = (f"{script}\nCOMP_LINE={line!r}; COMP_POINT={len(line)}; "
               "COMP_WORDS=(evalkit run +experiment=quick); COMP_CWORD=2; "
               '_evalkit_complete; print -l -- "${COMPREPLY[@]}"')
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    done = subprocess.run(["zsh", "-f", "-c", program], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["+experiment=quickstart"]


def test_report_completes_run_ids_for_each_of_its_runs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for run_id in ("20261127T100000-aaaaaa", "20261127T110000-bbbbbb"):
        (tmp_path / "runs" / "exp" / run_id).mkdir(parents=True)
        (tmp_path / "runs" / "exp" / run_id / "manifest.json").write_text("{}")
    assert candidates("evalkit report 2026") == ["20261127T100000-aaaaaa ",
                                                 "20261127T110000-bbbbbb "]
    # a second run to compare with: the one given is not offered again
    assert candidates("evalkit report 20261127T100000-aaaaaa 2026") == [
        "20261127T110000-bbbbbb "]
    assert "latest " in candidates("evalkit report --n-boot 0 ")
