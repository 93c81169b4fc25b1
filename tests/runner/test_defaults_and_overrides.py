"""Safe defaults and overrides as a new user types them: the pipeline-failure filter is on in
every run unless turned off, a documented plugin key needs no Hydra '+', and
``experiment=x`` without its '+' says how to write it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from evalkit.config import load, plain_override
from evalkit.errors import ConfigError
from tests.conftest import run_cli, run_dirs

pytestmark = pytest.mark.e2e  # runs evalkit end to end

ENVELOPE = {"completion": None, "rawRequest": {"model": "m", "messages": []}}


def _config(tmp_path: Path, filters: dict | None = None) -> dict:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"input": "Summarize: the build is red", "output": "Build broken."},
        {"input": "Summarize: the build is red", "output": ENVELOPE, "level": "ERROR"},
    ]))
    cfg = {"experiment": "t", "source": {"plugin": "jsonl", "path": str(data)},
           "judges": {"prompt_echo": {"plugin": "prompt_echo"}},
           "runner": {"runs_dir": str(tmp_path / "runs"), "summary": False}}
    if filters is not None:
        cfg["filters"] = filters
    return cfg


def test_pipeline_failure_filter_is_first_in_a_config_without_filters(tmp_path: Path) -> None:
    for filters in (None, {}):
        rc = load(OmegaConf.create(_config(tmp_path, filters)))
        assert [(f.name, f.plugin) for f in rc.filters] == [("pipeline_failure",
                                                             "pipeline_failure")]
        assert list(rc.composed["filters"]) == ["pipeline_failure"]
        assert rc.composed["filters"]["pipeline_failure"]["plugin"] == "pipeline_failure"


def test_pipeline_failure_filter_joins_an_experiments_own_filters(tmp_path: Path) -> None:
    rc = load(OmegaConf.create(_config(tmp_path, {"lvl": {"plugin": "level"}})))
    assert [f.name for f in rc.filters] == ["pipeline_failure", "lvl"]
    # a filter of that plugin under another name stands for it
    rc = load(OmegaConf.create(_config(tmp_path, {"pf": {"plugin": "pipeline_failure",
                                                         "status_message_pattern": "x"}})))
    assert [f.name for f in rc.filters] == ["pf"]


def test_pipeline_failure_filter_is_turned_off_explicitly(tmp_path: Path) -> None:
    rc = load(OmegaConf.create(_config(tmp_path, {"pipeline_failure": None})))
    assert rc.filters == []


def test_a_bare_run_never_judges_a_failed_call(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    run_cli("run", "source=jsonl", f"source.path={cfg['source']['path']}",
            "judges=[prompt_echo]", "runner.summary=false", cwd=tmp_path)
    (run,) = run_dirs(tmp_path, "default")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["excluded_by"] == {"pipeline_failure": 1}
    assert manifest["judgments"]["prompt_echo"] == {"ok": 1, "skipped": 1}
    run_cli("run", "source=jsonl", f"source.path={cfg['source']['path']}",
            "judges=[prompt_echo]", "filters.pipeline_failure=null", "runner.summary=false",
            cwd=tmp_path)
    manifest = json.loads((run_dirs(tmp_path, "default")[-1] / "manifest.json").read_text())
    assert manifest["n_excluded"] == 0
    assert manifest["judgments"]["prompt_echo"] == {"ok": 2}


@pytest.mark.parametrize("arg, expected", [
    ("judges.x.response_format=none", "++judges.x.response_format=none"),
    ("source.record_id=id", "++source.record_id=id"),
    ("filters.pipeline_failure=null", "++filters.pipeline_failure=null"),
    ("runner.batch_size=10", "++runner.batch_size=10"),
    ("source=csv", "source=csv"),
    ("judges=[prompt_echo]", "judges=[prompt_echo]"),
    ("+source.record_id=id", "+source.record_id=id"),
    ("~judges.refusal", "~judges.refusal"),
    ("hydra.searchpath=[file:///x]", "hydra.searchpath=[file:///x]"),
    ("+experiment=quickstart", "+experiment=quickstart"),
])
def test_plain_override(arg: str, expected: str) -> None:
    assert plain_override(arg) == expected


def test_experiment_without_plus_gets_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"evalkit run \+experiment=quickstart"):
        plain_override("experiment=quickstart")
    proc = run_cli("run", "experiment=quickstart", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "evalkit: error: experiment=quickstart: an experiment is added with a '+': "
        "evalkit run +experiment=quickstart"]


def test_documented_plugin_keys_are_set_without_plus(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("id,input,output\na1,hi,hello\na2,hi,hi\n")
    out = run_cli("run", "source=csv", f"source.path={data}", "source.record_id=id",
                  "judges=[prompt_echo]", "runner.summary=false", cwd=tmp_path)
    assert out.returncode == 0
    (run,) = run_dirs(tmp_path, "default")
    ids = run_cli("query", "SELECT record_id FROM records ORDER BY 1", "--format", "csv",
                  cwd=tmp_path).stdout.split()
    assert [i.strip('"') for i in ids[1:]] == ["a1", "a2"]
    # an LLM judge's key its preset does not list
    out = run_cli("run", "+experiment=llm_judge", "judges.hallucination_llm.response_format=none",
                  "judges.hallucination_llm.model=openai/x", "--cfg", "job", cwd=tmp_path)
    assert "response_format: none" in out.stdout
    # a typo still fails, naming the valid keys
    proc = run_cli("run", "+experiment=quickstart", "judges.prompt_echo.treshold=0.5",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "did you mean 'threshold'" in proc.stderr


def test_a_run_with_nothing_to_evaluate_says_so(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    proc = run_cli("run", "source=jsonl", f"source.path={cfg['source']['path']}",
                   "runner.summary=false", cwd=tmp_path)
    assert proc.stderr.startswith("evalkit: warning: nothing to evaluate: this config has no "
                                  "judges and no metrics")
    assert "+experiment=quickstart" in proc.stderr
    proc = run_cli("run", "source=jsonl", f"source.path={cfg['source']['path']}",
                   "judges=[prompt_echo]", "runner.summary=false", cwd=tmp_path)
    assert "nothing to evaluate" not in proc.stderr


def test_cfg_job_and_the_manifest_show_every_plugins_defaults(tmp_path: Path) -> None:
    out = run_cli("run", "+experiment=quickstart", "--cfg", "job", cwd=tmp_path).stdout
    # keys the presets do not set, with the plugins' defaults
    for line in ("    ngram: 3", "    min_words: 3", "  max_line_bytes:", "    http_error: true",
                 "  batch_size: 50000"):
        assert line in out, line
    assert not (tmp_path / "runs").exists()
    run_cli("run", "+experiment=quickstart", "runner.summary=false", cwd=tmp_path)
    (run,) = run_dirs(tmp_path, "quickstart")
    config = json.loads((run / "manifest.json").read_text())["config"]
    assert config["judges"]["prompt_echo"]["ngram"] == 3
    assert config["filters"]["pipeline_failure"]["request_envelope"] is True
    assert config["runner"]["batch_size"] == 50000
