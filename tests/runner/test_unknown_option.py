"""An override naming a config that its group does not have (``judges=[refusal]``,
``source=jsnl``, ``+experiment=startr``): one line naming the group, what it has and the
closest name, exit 2, instead of Hydra's page about the config search path."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.runner import app


@pytest.mark.parametrize("arg, line", [
    ("judges=[prompt_echo,refusl]", "judges=[prompt_echo,refusl]: the group judges has no "
                                    "config 'refusl'"),
    ("source=jsnl", "source=jsnl: the group source has no config 'jsnl'; did you mean jsonl?"),
    ("+experiment=startr", "+experiment=startr: the group experiment has no config 'startr'; "
                           "did you mean starter?"),
])
def test_an_unknown_group_option_is_one_line(tmp_path: Path, monkeypatch, capsys, arg, line):
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "starter.yaml").write_text("# @package _global_\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        app.main(["+experiment=quickstart", arg] if "experiment" not in arg else [arg])
    assert exit_.value.code == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"evalkit: error: {line}"), err
    assert "(it has: " in err


def test_known_options_user_configs_and_other_overrides_pass(tmp_path: Path, monkeypatch):
    (tmp_path / "conf" / "judges").mkdir(parents=True)
    (tmp_path / "conf" / "judges" / "mine.yaml").write_text("mine: {plugin: prompt_echo}\n")
    monkeypatch.chdir(tmp_path)
    argv = app.with_user_conf(["+experiment=quickstart", "judges=[prompt_echo,mine]",
                               "source=csv", "judges.prompt_echo.threshold=0.8", "judges=[]",
                               "hydra/launcher=basic", "metrics=glob(*)", "~sinks"])
    assert app.unknown_option(argv) is None
    # configs from a directory Hydra is told about: Hydra's to find
    assert app.unknown_option(["-cd", "elsewhere", "source=mine"]) is None
