"""Shadow evaluation (``generate:``): recorded inputs replayed through a candidate, each
candidate a record beside its recorded one, judged alike, and compared paired within the run
exactly as two separate runs would be."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import evalkit
from evalkit.comparison import compare_runs
from evalkit.comparison.sides import side_view, split_side
from evalkit.errors import ConfigError, EvalkitError
from evalkit.generate.llm import LlmGeneratorConfig, request_messages
from tests.generate.experiments import echo_experiment

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer, Reply  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_engines")  # (tests/conftest.py)

SYSTEM = {"role": "system", "content": "You are a terse assistant."}


def _rows(n: int = 12) -> list[dict]:
    rows = []
    for i in range(n):
        history = [SYSTEM, {"role": "user", "content": f"What is the capital of country {i}?"}]
        if i % 3 == 0:  # a longer conversation: the earlier answer is replayed as sent
            history += [{"role": "assistant", "content": f"Country {i}'s capital is C{i}."},
                        {"role": "user", "content": f"And its population, country {i}?"}]
        rows.append({"id": f"q{i}", "model": "prod-model", "messages": history,
                     "answer": history[-1]["content"] if i % 4 == 0 else f"It is C{i}.",
                     "latency_s": 0.5 + i / 10})
    rows[5]["answer"] = None  # a failed production call (null output)
    return rows


def _one(run: evalkit.Run, sql: str) -> object:
    return run.query(sql).column(0)[0].as_py()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    for name in ("chats", "chats_b"):
        (tmp_path / "conf" / "experiment" / f"{name}.yaml").write_text(
            echo_experiment(name, data if name == "chats" else tmp_path / "candidates.jsonl",
                            "model", latency=True))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALKIT_USER_CONF", str(tmp_path / "conf"))
    return tmp_path


def test_the_bundled_shadow_experiment_runs_offline(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = evalkit.run("shadow")
    records = run.records.to_pylist()
    recorded = [r for r in records if r["side"] == "recorded"]
    candidates = {r["record_id"]: r for r in records if r["side"] == "candidate"}
    assert len(recorded) == 160
    # every recorded record replayed: the 120 kept and the 40 failed calls (replay_failed)
    assert len(candidates) == 160
    for r in recorded:
        c = candidates[r["record_id"] + "::candidate"]
        assert c["input"] == r["input"] and c["model"] == "offline"
        assert c["excluded_by"] in (None, "pipeline_failure")  # (an empty echo of nothing)
        assert json.loads(c["metadata"])["generate"]["recorded_id"] == r["record_id"]
    manifest = run.manifest
    assert manifest["generate"]["replayed"] == 160 and manifest["generate"]["failed"] == 0
    metrics = {(m["metric"], m["slice"]): m for m in run.metrics.to_pylist()}
    assert {("echo_rate", "side=recorded"), ("echo_rate", "side=candidate")} <= set(metrics)
    recovery = metrics[("failure_recovery", "all")]
    assert recovery["n_judged"] == 40 and 0 < recovery["value"] <= 1
    assert recovery["ci_low"] <= recovery["value"] <= recovery["ci_high"]
    judged = _one(run, "SELECT count(DISTINCT record_id) FROM judgments "
                       "WHERE judge = 'prompt_echo' AND status = 'ok'")
    kept = sum(1 for r in records if r["excluded_by"] is None)
    assert judged == kept  # both sides judged, the set-aside ones of either side skipped


def test_recorded_messages_are_replayed_to_the_candidate(project: Path) -> None:
    server = FakeLLMServer().start()
    try:
        run = evalkit.run("chats", [
            "generate=llm", "generate.model=openai/cand-1", f"generate.api_base={server.url}",
            "generate.cache=false", "generate.max_retries=0"])
        requests = [r["body"] for r in server.requests]
    finally:
        server.stop()
    rows = {r["id"]: r for r in _rows()}
    kept = [i for i, r in rows.items() if r["answer"] is not None]  # the failed one is not
    assert len(requests) == len(kept)
    sent = sorted(json.dumps(b["messages"]) for b in requests)
    assert sent == sorted(json.dumps(rows[i]["messages"]) for i in kept)
    assert {b["model"] for b in requests} == {"cand-1"}
    assert all("response_format" not in b for b in requests)  # free text, not JSON
    records = {r["record_id"]: r for r in run.records.to_pylist()}
    for i in kept:
        cand = records[f"{i}::candidate"]
        assert cand["side"] == "candidate" and cand["model"] == "openai/cand-1"
        assert cand["output"] and cand["latency_s"] is not None
        assert cand["input_tokens"] and cand["output_tokens"]
    assert "q5::candidate" not in records  # a failed recorded call is not replayed by default


def test_a_candidate_that_fails_is_set_aside_and_the_run_goes_on(project: Path) -> None:
    server = FakeLLMServer().start()
    server.plan = lambda body: Reply(status=500) if "country 2?" in json.dumps(
        body["messages"]) else Reply()
    try:
        run = evalkit.run("chats", [
            "generate=llm", "generate.model=openai/cand-1", f"generate.api_base={server.url}",
            "generate.cache=false", "generate.max_retries=0"])
    finally:
        server.stop()
    records = {r["record_id"]: r for r in run.records.to_pylist()}
    failed = records["q2::candidate"]
    assert failed["excluded_by"] == "generate" and "500" in failed["exclude_reason"]
    assert run.manifest["generate"]["failed"] == 1
    judgment = _one(run, "SELECT status FROM judgments WHERE record_id = 'q2::candidate'")
    assert judgment == "skipped"


def test_request_messages_template_and_system_prompt() -> None:
    record = {"record_id": "r", "input": "What is 2+2?", "context": ["a", "b"],
              "metadata": json.dumps({"input_messages": [
                  SYSTEM, {"role": "user", "content": "hi"},
                  {"role": "assistant", "content": "hello"}]})}
    replay = request_messages(LlmGeneratorConfig(model="m"), record)
    assert replay == [SYSTEM, {"role": "user", "content": "hi"}]  # the recorded answer left out
    swapped = request_messages(LlmGeneratorConfig(model="m", system_prompt="Be kind."), record)
    assert swapped == [{"role": "system", "content": "Be kind."},
                       {"role": "user", "content": "hi"}]
    template = LlmGeneratorConfig(model="m", template="Q: {input}\nSources:\n{context}")
    assert request_messages(template, record) == [
        {"role": "user", "content": "Q: What is 2+2?\nSources:\na\n\nb"}]
    with pytest.raises(ValueError, match="not a record column"):
        LlmGeneratorConfig(model="m", template="{question}").validate()
    with pytest.raises(ValueError, match="judge_sides"):
        LlmGeneratorConfig(model="m", judge_sides="recorded").validate()


def test_a_bad_generator_setting_is_one_config_error(project: Path) -> None:
    with pytest.raises(ConfigError, match="generate.judge_sides"):
        evalkit.run("chats", ["generate=llm", "generate.model=m", "generate.offline=true",
                              "generate.judge_sides=nope"])


def test_within_the_run_the_comparison_equals_two_separate_runs(project: Path) -> None:
    shadow = evalkit.run("chats", ["generate=llm", "generate.model=m", "generate.offline=true"])
    # the same comparison from two runs: the recorded data, and the candidates as data
    candidates = [r for r in shadow.records.to_pylist() if r["side"] == "candidate"]
    by_id = {r["id"]: r for r in _rows()}
    lines = []
    for c in candidates:
        rid = c["record_id"].removesuffix("::candidate")
        lines.append({**by_id[rid], "answer": c["output"], "model": c["model"],
                      "latency_s": c["latency_s"]})
    (project / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    run_a = evalkit.run("chats")
    run_b = evalkit.run("chats_b")
    two = compare_runs(run_a.run_dir, run_b.run_dir, n_boot=40, max_boot=40)
    scratch = project / "scratch"
    one = compare_runs(side_view(shadow.run_dir, "recorded", scratch / "a"),
                       side_view(shadow.run_dir, "candidate", scratch / "b"),
                       n_boot=40, max_boot=40)
    keys = ("metric", "slice", "a", "b", "delta", "ci_low", "ci_high", "p_value", "verdict")
    assert [{k: r.get(k) for k in keys} for r in one.rows] == \
        [{k: r.get(k) for k in keys} for r in two.rows]
    assert one.n_shared == two.n_shared == len(_rows()) - 1  # (q5 failed: not replayed)
    assert any(r["metric"] == "echo_rate" for r in one.rows)
    assert split_side("20260101T000000-abc:candidate") == ("20260101T000000-abc", "candidate")
    assert split_side("runs/x") == ("runs/x", None)


def test_side_of_a_run_without_candidates_is_one_error(project: Path) -> None:
    run = evalkit.run("chats")
    with pytest.raises(EvalkitError, match="no candidate records"):
        side_view(run.run_dir, "candidate", project / "scratch")
    assert pq.read_table(run.run_dir / "records.parquet").column("side").null_count == \
        run.records.num_rows


def test_a_dry_run_prices_the_candidate_and_calls_nothing(project: Path) -> None:
    from tests.conftest import run_cli, run_dirs

    server = FakeLLMServer().start()
    try:
        run_cli("run", "+experiment=chats", "generate=llm", "generate.model=openai/gpt-4o-mini",
                f"generate.api_base={server.url}", "runner.dry_run=true",
                "runner.summary=false", cwd=project,
                env={"EVALKIT_USER_CONF": str(project / "conf")})
        assert server.requests == []
    finally:
        server.stop()
    (run_dir,) = run_dirs(project, "chats")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "dry_run"
    estimate = manifest["generate"]["dry_run_estimate"]
    assert estimate["calls"] == len(_rows()) - 1  # every kept record, one call each
    assert estimate["input_tokens"] > 0 and estimate["cost_usd"] > 0  # gpt-4o-mini is priced
    sides = pq.read_table(run_dir / "records.parquet").column("side").to_pylist()
    assert set(sides) == {"recorded"}


@pytest.mark.e2e
def test_a_sweep_over_candidates_gives_one_run_each_on_the_same_records(project: Path) -> None:
    from tests.conftest import run_cli, run_dirs

    server = FakeLLMServer().start()
    try:
        proc = run_cli("run", "-m", "+experiment=chats", "generate=llm",
                       "generate.model=openai/cand-a,openai/cand-b",
                       f"generate.api_base={server.url}", "generate.cache=false",
                       "runner.summary=false", cwd=project,
                       env={"EVALKIT_USER_CONF": str(project / "conf")})
        models = sorted({r["body"]["model"] for r in server.requests})
    finally:
        server.stop()
    assert "2 jobs, 0 failed" in proc.stdout, proc.stdout
    assert models == ["cand-a", "cand-b"]
    runs = [evalkit.open_run(str(d)) for d in run_dirs(project, "chats")]
    candidates = [{r["record_id"] for r in run.records.to_pylist() if r["side"] == "candidate"}
                  for run in runs]
    assert len(runs) == 2 and candidates[0] == candidates[1] and len(candidates[0]) == 11
    assert {run.manifest["sweep_id"] for run in runs} != {None}


def test_the_candidates_endpoint_limits_are_in_the_manifest_and_summary(project: Path) -> None:
    """The generate stage's model pushes back like a judge's: its refusals, pauses and the
    rate it settled at are in the manifest's ``endpoints`` and the summary's lines."""
    from evalkit.runner.summary import endpoint_line

    server = FakeLLMServer().start()
    server.push(*[Reply(status=429, delay=0.0, headers={"retry-after-ms": "20"})] * 3)
    try:
        run = evalkit.run("chats", [
            "generate=llm", "generate.model=openai/cand-1", f"generate.api_base={server.url}",
            "generate.cache=false"])
    finally:
        server.stop()
    assert run.manifest["generate"]["failed"] == 0  # none lost to a 429
    [(endpoint, stats)] = run.manifest["endpoints"].items()
    assert endpoint == f"openai/cand-1 @ 127.0.0.1:{server.port}"
    assert stats["refusals"] == 3 and stats["paused_s"] > 0 and stats["rate_per_s"] > 0
    assert endpoint_line(endpoint, stats).startswith(f"endpoint {endpoint}: 3 refused (429)")


def test_one_endpoint_called_by_judges_and_the_candidate_is_one_entry() -> None:
    from evalkit.runner.summary import merge_endpoint_stats

    judges = {"rate_per_s": None, "in_flight": None, "refusals": 2, "overloads": 0,
              "paused_s": 0.25}
    candidate = {"rate_per_s": 12.5, "in_flight": 4, "refusals": 3, "overloads": 1,
                 "paused_s": 0.5}
    assert merge_endpoint_stats(judges, candidate) == {
        "rate_per_s": 12.5, "in_flight": 4, "refusals": 5, "overloads": 1, "paused_s": 0.75}
    assert merge_endpoint_stats(None, candidate) == candidate
