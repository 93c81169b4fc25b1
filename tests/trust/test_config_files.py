"""Config files are input: a YAML alias bomb, a huge file, a FIFO or YAML nested past what a
loader can take in ./conf (or any searched directory) is one line naming the file, exit 2,
quickly, before Hydra reads it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import evalkit
from evalkit.errors import ConfigError

LEVELS = "abcdefghij"


def bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs: ``width ** levels`` strings from a dozen lines."""
    lines = [f"{LEVELS[0]}: &{LEVELS[0]} [{', '.join(['lol'] * width)}]"]
    for prev, name in zip(LEVELS[:levels - 1], LEVELS[1:levels], strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * width)}]")
    return "# @package _global_\n" + "\n".join(lines) + "\n"


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (not hang) when the body runs past ``seconds``: before the bound, a bomb never
    finished loading."""
    def stop(*_: object) -> None:
        raise TimeoutError(f"still loading the config after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def mapping_bomb(levels: int = 8, width: int = 8) -> str:
    """The same with mappings: each level a mapping of ``width`` aliases to the one below."""
    lines = ["x: &x {a: 1, b: 2, c: 3, d: 4}"]
    for i in range(levels):
        below = "x" if i == 0 else f"y{i - 1}"
        keys = ", ".join(f"k{j}: *{below}" for j in range(width))
        lines.append(f"y{i}: &y{i} {{{keys}}}")
    return "# @package _global_\n" + "\n".join(lines) + "\n"


CASES = {
    "bomb": (bomb(), "aliases expand to more than 100,000 values"),
    "bomb_mapping": (mapping_bomb(), "aliases expand"),
    "huge": ("# @package _global_\nx: '" + "y" * (2 << 20) + "'\n",
             "more than a config file may hold"),
    "deep": ("x: " + "[" * 20000 + "]" * 20000 + "\n", "not valid YAML"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_config_file_is_one_line(name: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text, message = CASES[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / f"{name}.yaml").write_text(text)
    t0 = time.monotonic()
    with deadline(20), pytest.raises(ConfigError, match=message) as caught:
        evalkit.run(name)
    assert time.monotonic() - t0 < 5
    assert str(caught.value).startswith(f"conf/experiment/{name}.yaml") and \
        "\n" not in str(caught.value)


def test_a_fifo_and_a_searched_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "judges").mkdir(parents=True)
    os.mkfifo(tmp_path / "conf" / "judges" / "stuck.yaml")
    with pytest.raises(ConfigError, match="stuck.yaml: not a regular file"):
        evalkit.run("quickstart")
    os.unlink(tmp_path / "conf" / "judges" / "stuck.yaml")
    elsewhere = tmp_path / "more"
    elsewhere.mkdir()
    (elsewhere / "x.yaml").write_text(bomb())
    with deadline(20), pytest.raises(ConfigError, match="x.yaml: its YAML aliases expand"):
        evalkit.run("quickstart", [f"hydra.searchpath=[file://{elsewhere}]"])


def test_ordinary_anchors_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "anchored.yaml").write_text(
        "# @package _global_\ndefaults:\n  - quickstart\n  - _self_\n"
        "experiment: anchored\nalerts:\n  - &warn {metric: echo_rate, value: 0.9, "
        "severity: warning}\n  - {<<: *warn, value: 0.95}\n")
    run = evalkit.run("anchored")
    assert run.experiment == "anchored"


@pytest.mark.e2e
def test_the_cli_ends_an_alias_bomb_at_once(tmp_path: Path) -> None:
    from tests.conftest import EVALKIT

    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "bomb.yaml").write_text(bomb())
    proc = subprocess.run([EVALKIT, "run", "+experiment=bomb"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("evalkit: error: conf/experiment/bomb.yaml: its YAML "
                                  "aliases expand") and len(proc.stderr.splitlines()) == 1
