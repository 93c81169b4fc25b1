"""Plugin discovery through entry points, the way a third party's package is found: a real
installed distribution (tests/fake_plugin, installed into a scratch directory) and hand-made
distribution metadata for the error cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.errors import PluginError
from evalkit.registry import Registry
from tests.conftest import run_cli, run_dirs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fake_plugin, built and installed (not editable) into its own directory."""
    site = tmp_path_factory.mktemp("fake_site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(site),
                    str(ROOT / "tests" / "fake_plugin")], check=True)
    return site


def _dist(site: Path, name: str, version: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_builtins_are_registered_through_entry_points() -> None:
    reg = Registry()
    for kind, name in [("sources", "jsonl"), ("filters", "pipeline_failure"),
                       ("judges", "prompt_echo"), ("metrics", "rate")]:
        (entry,) = reg.entries(kind)[name]
        assert entry.distribution == "evalkit"


def test_unknown_name_suggests_and_lists() -> None:
    with pytest.raises(PluginError) as err:
        Registry().get("judges", "promt_echo")
    assert "did you mean 'prompt_echo'" in str(err.value)
    assert "installed:" in str(err.value) and "refusal" in str(err.value)


def test_third_party_plugin_is_found_and_lazy(fake_site: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(fake_site))
    sys.modules.pop("evalkit_fake_plugin", None)
    reg = Registry()
    (entry,) = reg.entries("judges")["word_count"]
    assert (entry.distribution, entry.version) == ("evalkit-fake-plugin", "9.9.9")
    assert "evalkit_fake_plugin" not in sys.modules  # found, not imported
    assert reg.get("judges", "word_count").__name__ == "WordCountJudge"


def test_duplicate_name_from_two_distributions_names_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dist(tmp_path, "evalkit-echo-fork", "2.0",
          "[evalkit.judges]\nprompt_echo = evalkit_echo_fork:EchoJudge\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as err:
        Registry().get("judges", "prompt_echo")
    msg = str(err.value)
    assert "registered twice" in msg and "evalkit 0.1.0" in msg and "evalkit-echo-fork 2.0" in msg


def test_plugin_missing_its_protocol_is_rejected(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "half_plugin.py").write_text(
        "from dataclasses import dataclass\nfrom evalkit.plugin import Judge\n"
        "@dataclass(frozen=True)\nclass C:\n    pass\n"
        "class Half(Judge):\n    Config = C\n")
    _dist(tmp_path, "half-plugin", "0.1", "[evalkit.judges]\nhalf = half_plugin:Half\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError) as err:
        Registry().get("judges", "half")
    assert str(err.value) == ("judge plugin 'half' (half_plugin:Half, from half-plugin 0.1) "
                              "does not implement judge(); see evalkit.plugin.Judge")


def test_autoload_switch_keeps_only_builtins(fake_site: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(fake_site))
    monkeypatch.setenv("EVALKIT_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = Registry()
    assert "word_count" not in reg.entries("judges") and "refusal" not in reg.entries("judges")
    assert "prompt_echo" in reg.entries("judges")


def test_third_party_judge_used_in_a_run_and_listed(fake_site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(fake_site)}
    listing = run_cli("plugins", "--kind", "judges", cwd=tmp_path, env=env).stdout
    assert "word_count" in listing and "evalkit-fake-plugin" in listing
    run_cli("run", "+experiment=quickstart", "+judges.words={plugin: word_count, max_words: 5}",
            cwd=tmp_path, env=env)
    (run,) = run_dirs(tmp_path, "quickstart")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["judgments"]["words"] == {"ok": 120, "skipped": 40}
    assert manifest["versions"]["evalkit-fake-plugin"] == "9.9.9"


def test_a_failing_plugin_fails_the_run_cleanly(fake_site: Path, tmp_path: Path) -> None:
    proc = run_cli("run", "+experiment=quickstart", "+metrics.bad={plugin: boom}", cwd=tmp_path,
                   env={"PYTHONPATH": str(fake_site)}, check=False)
    assert proc.returncode != 0
    (run,) = run_dirs(tmp_path, "quickstart")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "boom" in manifest["error"]
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
