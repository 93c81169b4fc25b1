"""Run ids and experiment names are names, never paths: anything that would put a run
outside ``runs/<experiment>/`` (or hide it there) is one line naming the key, exit 2, and
nothing is written; the same for a runs directory on object storage, and for every command
that turns a run id into a path."""

from __future__ import annotations

from pathlib import Path

import pytest

import evalkit
from evalkit.errors import ConfigError, EvalkitError
from evalkit.results.names import check_name

BAD = ["../../x", "../x", "/tmp/evalkit-abs", "a/b/c", ".", "..", ".hidden", "", "a\x00b",
       "x" * 129, "a\\b", "a b", "*", "[ab]", "-rf", "a\nb", "\x1b[2J",
       # 100 characters but 300 bytes: over a file name's 255 (Linux, macOS), the run
       # failed on its first write with "File name too long; free space or fix its
       # permissions"
       "\u30a2" * 100]
GOOD = ["nightly", "2026-11-27T10.00", "a_b-c.d", "Ünïcode", "1"]


@pytest.mark.parametrize("name", BAD)
def test_a_bad_name_is_one_line_naming_the_key(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_name(name, "runner.run_id")
    message = str(caught.value)
    assert message.startswith("runner.run_id: ") and "\n" not in message
    assert "\x00" not in message and "\x1b" not in message
    assert "runner.run_id=nightly-2" in message  # the fix


@pytest.mark.parametrize("name", GOOD)
def test_a_good_name_passes(name: str) -> None:
    assert check_name(name, "runner.run_id") == name


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "a" / "b" / "project"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


CASES = [
    ("runner.run_id=../../x", "runner.run_id"),
    ("runner.run_id=/tmp/evalkit-abs-run", "runner.run_id"),
    ("runner.run_id=a/b/c", "runner.run_id"),
    ("runner.run_id=.", "runner.run_id"),
    ("runner.run_id=..", "runner.run_id"),
    ("runner.run_id=.x", "runner.run_id"),
    ("runner.run_id=''", "runner.run_id"),
    ("runner.resume=../../x", "runner.resume"),
    ("+experiment=named_../../x", "experiment"),
    ("+experiment=named_..", "experiment"),
    ("+experiment=named_/tmp/evalkit-abs-exp", "experiment"),
    ("+experiment=named_", "experiment"),
    ("runner.run_id='" + "\u30a2" * 100 + "'", "runner.run_id"),
]


@pytest.mark.parametrize("override, key, runs_dir", [
    *[(o, k, "runs") for o, k in CASES],
    # the same on object storage (a file:// URL is served by the same code as s3://)
    *[(o, k, "file://{store}") for o, k in CASES
      if o.endswith(("../../x", "/tmp/evalkit-abs-exp"))]])
def test_a_run_never_leaves_its_experiment(project: Path, override: str, key: str,
                                           runs_dir: str) -> None:
    store = project.parent / "store"
    store.mkdir()
    experiment = "quickstart"
    if override.startswith("+experiment=named_"):  # an experiment file naming itself so
        experiment, override = "named", f"runner.runs_dir={runs_dir.format(store=store)}"
        conf = project / "conf" / "experiment"
        conf.mkdir(parents=True)
        name = override.removeprefix("+experiment=named_")
        (conf / "named.yaml").write_text(
            "# @package _global_\ndefaults:\n  - quickstart\n  - _self_\n"
            f"experiment: '{name}'\n")
    before = _files(project.parents[2])
    with pytest.raises(ConfigError, match=rf"^{key}: ") as caught:
        evalkit.run(experiment, [override, f"runner.runs_dir={runs_dir.format(store=store)}"])
    assert "\n" not in str(caught.value)
    assert _files(project.parents[2]) == before
    assert not Path("/tmp/evalkit-abs-run").exists()


def test_reading_a_run_by_id_never_follows_a_path(project: Path) -> None:
    evalkit.run("quickstart", ["runner.run_id=one"])
    for ref in ["../../x", "*", "[a-z]*", "..", "a/../..", "/etc", ".x", "o?e"]:
        with pytest.raises(EvalkitError) as caught:
            evalkit.open_run(ref)
        assert "\n" not in str(caught.value)
        with pytest.raises(EvalkitError):
            evalkit.connect("runs", run=ref)
    assert evalkit.open_run("one").id == "one"


@pytest.mark.e2e
def test_the_cli_says_so_in_one_line(project: Path, capsys: pytest.CaptureFixture) -> None:
    from evalkit.cli import main
    from tests.conftest import run_cli

    proc = run_cli("run", "+experiment=quickstart", "runner.run_id=../../x", cwd=project,
                   check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("evalkit: error: runner.run_id: '../../x' is not a valid "
                                  "run id")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _files(project.parents[2]) == ["a", "a/b", "a/b/project"]
    evalkit.run("quickstart", ["runner.run_id=one"])
    capsys.readouterr()
    for command in (["compare", "../../x", "latest"], ["push", "*", "--to", "langfuse"],
                    ["report", "*"], ["query", "--run", "[a-z]*", "SELECT 1"],
                    ["merge", "a/..", "b"], ["compact", "../../x"]):
        with pytest.raises(SystemExit) as caught:
            main(command)
        err = capsys.readouterr().err
        assert caught.value.code == 2, (command, err)
        assert len(err.strip().splitlines()) == 1, (command, err)
        assert "Traceback" not in err


# an instance name (the key under filters:, judges:, metrics:, sinks:) is a name too: the
# disagreements metric writes review/<name>.parquet and .csv, and a third-party plugin may
# write its own files the same way
INSTANCE_BAD = ["../../../../pwned", "{root}/abs-metric", "a/b", "..", ".hidden",
                "a\x00b", "x" * 129, "a\\b", "\x1b[2Jx"]


@pytest.mark.parametrize("kind", ["metrics", "judges", "filters"])
@pytest.mark.parametrize("name", INSTANCE_BAD)
def test_an_instance_name_is_a_name(project: Path, kind: str, name: str) -> None:
    import json

    name = name.replace("{root}", str(project.parents[2]))  # absolute, inside the test's root
    conf = project / "conf" / "experiment"
    conf.mkdir(parents=True)
    instances = {
        "metrics": {name: {"plugin": "disagreements", "judge_a": "prompt_echo",
                           "judge_b": "refusal"}},
        "judges": {name: {"plugin": "prompt_echo"}},
        "filters": {name: {"plugin": "level"}},
    }
    # JSON is YAML: the key is written exactly, NUL and escapes included
    (conf / "named.yaml").write_text(
        "# @package _global_\ndefaults:\n  - quickstart\n  - _self_\n"
        f"{kind}: {json.dumps(instances[kind])}\n")
    before = _files(project.parents[2])
    with pytest.raises(ConfigError, match=rf"^{kind}: ") as caught:
        evalkit.run("named", [])
    message = str(caught.value)
    assert "\n" not in message and "\x00" not in message and "\x1b" not in message, message
    assert "not a valid" in message or "characters long" in message, message
    assert _files(project.parents[2]) == before
