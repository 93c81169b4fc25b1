"""``hydra/launcher=submitit_*`` without the ``submitit`` extra: one line naming the install,
like Ray's, instead of Hydra's page about the config search path."""

from __future__ import annotations

import importlib.util

import pytest

from evalkit.runner import app


@pytest.fixture
def no_submitit(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name.startswith("hydra_plugins.hydra_submitit_launcher"):
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("arg", ["hydra/launcher=submitit_slurm", "hydra/launcher=submitit_local",
                                 "+hydra/launcher=submitit_slurm"])
def test_a_submitit_launcher_without_the_extra_is_one_line(no_submitit, capsys, arg):
    with pytest.raises(SystemExit) as exit_:
        app.main(["-m", "+experiment=quickstart", arg])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"evalkit: error: {arg.lstrip('+')} needs Hydra's submitit launcher, which "
                   'is not installed: pip install "evalkit[submitit]"']


def test_other_launchers_and_an_installed_submitit_pass():
    assert app.missing_launcher(["-m", "hydra/launcher=basic"]) is None
    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is not None:
        assert app.missing_launcher(["hydra/launcher=submitit_local"]) is None
