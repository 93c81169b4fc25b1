"""Every value a config reads from the environment, and every credential in a URL, is masked
wherever evalkit prints or stores it: an alert's message and hints (console and
alerts.parquet), the one-line error for an override holding '=', and a sweep's values
(multirun.yaml, Hydra's launch lines, the closing table). Everything under the test's
directory is read, not a list of known files."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

import evalkit
from evalkit.config import plain_override
from evalkit.errors import ConfigError
from evalkit.redact import hide_secret_overrides, register_env_resolver

PLAIN = "ticket-ABCDEFGH-42"  # in a variable whose name says nothing
NAMED = "dbpass-XYZ-9999"  # in DB_PASSWORD
URL_PASS, TOKEN = "urlpass-QQ-31337", "tok-RR-27182818"


def _leaks(root: Path, *texts: str, secrets: tuple[str, ...]) -> list[str]:
    found = [f"{p}: {s}" for p in root.rglob("*") if p.is_file()
             for s in secrets if s.encode() in p.read_bytes()]
    return found + [f"output: {s}" for t in texts for s in secrets if s in t]


def test_an_alert_from_the_environment_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAIN_NAME", PLAIN)
    monkeypatch.setenv("DB_PASSWORD", NAMED)
    monkeypatch.setenv("PUBLIC_ONE", "shown-as-it-is-77")
    monkeypatch.setenv("EVALKIT_PUBLIC_ENV", "PUBLIC_ONE")
    run = evalkit.run("quickstart", [
        "alerts.0.value=-1",
        "alerts.0.message='${oc.env:PLAIN_NAME} ${oc.env:DB_PASSWORD} ${oc.env:PUBLIC_ONE} "
        f"https://me:{URL_PASS}@host/x?token={TOKEN}'",
        "++alerts.0.hints=['page ${oc.env:PLAIN_NAME}']"], summary=True)
    printed = capsys.readouterr()
    [alert] = pq.read_table(run.run_dir / "alerts.parquet").to_pylist()
    assert alert["message"].startswith("***redacted*** ***redacted*** shown-as-it-is-77 ")
    assert alert["hints"] == ["page ***redacted***"]
    assert "alert warning: ***redacted***" in printed.out
    assert _leaks(tmp_path, printed.out, printed.err,
                  secrets=(PLAIN, NAMED, URL_PASS, TOKEN)) == []


def test_a_default_and_evalkits_own_settings_are_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.redact import mask

    register_env_resolver()
    monkeypatch.setenv("EVALKIT_JUDGE_MODEL", "openai/some-model-name")
    monkeypatch.setenv("SOME_VALUE", "some-value-from-env")
    cfg = OmegaConf.create({"a": "${oc.env:EVALKIT_JUDGE_MODEL}", "b": "${oc.env:SOME_VALUE}",
                            "c": "${oc.env:UNSET_VARIABLE_X,default-value-1}"})
    assert OmegaConf.to_container(cfg, resolve=True) == {
        "a": "openai/some-model-name", "b": "some-value-from-env", "c": "default-value-1"}
    assert mask("openai/some-model-name some-value-from-env default-value-1") == \
        "openai/some-model-name ***redacted*** default-value-1"


@pytest.mark.parametrize("value", [
    f"https://me:{URL_PASS}@host/v1?token={TOKEN}&x=1",
    f"https://host/v1?a=1&api_key={TOKEN}",
    f"postgres://me:{URL_PASS}@db/x?sslmode=require"])
def test_the_error_for_an_override_holding_equals_masks_it(value: str) -> None:
    with pytest.raises(ConfigError, match="holds '='") as caught:
        plain_override(f"source.url={value}")
    assert URL_PASS not in str(caught.value) and TOKEN not in str(caught.value)


@pytest.mark.parametrize("override", [
    f"k.url='https://u:{URL_PASS}@h/v1','https://u:{URL_PASS}2@h/v1'",
    f"k.url=\"https://h/?token={TOKEN}\",\"https://h/?token={TOKEN}2\"",
    f"k.url=choice('https://u:{URL_PASS}@h/v1',plain)",
    f"k.url=https://u:{URL_PASS}@h/v1,https://u:{URL_PASS}2@h/v1",
    f"k.urls=[https://u:{URL_PASS}@h/v1,plain]",
    f"k.urls='[nested]',[['https://h/?token={TOKEN}']]",
    f"k.map={{a:'https://h/?token={TOKEN}',b:2}}",
    f"k.api_key={TOKEN},{TOKEN}2",
])
def test_a_sweep_list_holds_no_secret(override: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("EVALKIT_SECRET_OVERRIDE_")]:
        monkeypatch.delenv(key)
    [hidden] = hide_secret_overrides([override])
    assert URL_PASS not in hidden and TOKEN not in hidden, hidden
    # and each job still gets its own values once the interpolations are resolved
    assert _values(hidden) == _values(override)


def _values(override: str) -> list[object]:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, QuotedString

    def plain(e: object) -> object:
        if isinstance(e, QuotedString):
            return e.text
        if isinstance(e, list):
            return [plain(x) for x in e]
        if isinstance(e, dict):
            return {k: plain(v) for k, v in e.items()}
        return e

    value = OverridesParser.create().parse_override(override).value()
    elements = value.list if isinstance(value, ChoiceSweep) else [value]
    return [OmegaConf.to_container(OmegaConf.create({"v": plain(e)}), resolve=True)["v"]
            for e in elements]


@pytest.mark.e2e
def test_a_sweep_and_a_bad_override_print_and_write_no_secret(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    urls = [f"https://u:{URL_PASS}{i}@h/?token={TOKEN}{i}" for i in (1, 2)]
    swept = run_cli("run", "-m", "+experiment=quickstart", "alerts.0.value=-1",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}",
                    "alerts.0.message=" + ",".join(f"'{u}'" for u in urls),
                    cwd=tmp_path, check=False)
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert (tmp_path / "sweep" / "multirun.yaml").is_file()
    assert len(list((tmp_path / "runs" / "quickstart").iterdir())) == 2
    bad = run_cli("run", "+experiment=quickstart", f"source.path={urls[0]}&x=1", cwd=tmp_path,
                  check=False)
    assert bad.returncode == 2 and "holds '='" in bad.stderr
    assert _leaks(tmp_path, swept.stdout, swept.stderr, bad.stdout, bad.stderr,
                  secrets=(URL_PASS, TOKEN)) == []
