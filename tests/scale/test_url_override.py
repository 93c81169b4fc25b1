"""A value holding '=' (a runs_dir URL's query string) must be quoted for Hydra; unquoted,
Hydra fails with its grammar's words and exit 1. evalkit says how to quote it, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.config import plain_override
from evalkit.errors import ConfigError
from tests.conftest import run_cli

URL = "s3://evals/runs?endpoint_override=127.0.0.1:9&scheme=http"


def test_an_unquoted_value_with_an_equals_sign_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"runner\.runs_dir: .*quote"):
        plain_override(f"runner.runs_dir={URL}")
    proc = run_cli("run", "+experiment=quickstart", f"runner.runs_dir={URL}", cwd=tmp_path,
                   check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and f"\"runner.runs_dir='{URL}'\"" in \
        proc.stderr


@pytest.mark.parametrize("arg", [f"runner.runs_dir='{URL}'", f'runner.runs_dir="{URL}"',
                                 "x=range(start=0,stop=3)", "a.b=['k=v']", "+x=1", "x=a,b"])
def test_quoted_values_and_sweep_functions_pass(arg: str) -> None:
    assert plain_override(arg).lstrip("+").endswith(arg.lstrip("+"))
