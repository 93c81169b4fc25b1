"""A sweep over candidates ranks them: three candidates behind a fake OpenAI-compatible server
echo the prompt at different, known rates; the closing table (80 columns) and the report's
ranking section order them best first with their intervals and say which differences are
significant, and every number equals one computed from the runs' Parquet files with the
reference implementations (statsmodels' Wilson interval and Holm, scipy's exact binomial
test for McNemar)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from evalkit.comparison.ranking import default_metric, rank_sweep
from tests.generate.experiments import echo_experiment

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges" / "llm"))
from fake_llm_server import FakeLLMServer, Reply  # noqa: E402

N = 60


def echoes(model: str, i: int) -> bool:
    """Whether candidate ``model`` echoes the question of record ``i``: cand-a 3 of 60,
    cand-b 30 of 60, cand-c cand-b's 30 and 3 more (a difference too small to tell)."""
    return {"cand-a": i % 20 == 0, "cand-b": i % 2 == 0,
            "cand-c": i % 2 == 0 or i % 20 == 1}[model]


def _plan(body: dict) -> Reply:
    question = body["messages"][-1]["content"]
    i = int(re.search(r"number (\d+)", question).group(1))
    if echoes(body["model"], i):
        return Reply(content=question)
    return Reply(content=f"Paris has about {i} bridges worth a visit, and museums too.")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from tests.conftest import run_cli

    root = tmp_path_factory.mktemp("ranking")
    (root / "conf" / "experiment").mkdir(parents=True)
    rows = [{"id": f"q{i}", "messages": [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": f"Tell me something about Paris, question number {i}."}],
        "answer": f"Paris is lovely ({i})."} for i in range(N)]
    (root / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "conf" / "experiment" / "cands.yaml").write_text(
        echo_experiment("cands", root / "chats.jsonl", "side"))
    server = FakeLLMServer().start()
    server.plan = _plan
    try:
        proc = run_cli("run", "-m", "+experiment=cands", "generate=llm",
                       # not in the order of the ranking: the table sorts them
                       "generate.model=openai/cand-c,openai/cand-a,openai/cand-b",
                       f"generate.api_base={server.url}", "generate.cache=false", cwd=root,
                       env={"EVALKIT_USER_CONF": str(root / "conf"), "COLUMNS": "80"})
    finally:
        server.stop()
    return root, proc.stdout


@pytest.fixture(scope="module")
def ranked(sweep: tuple[Path, str]) -> tuple[list[Path], object]:
    """The sweep's runs and their ranking, computed once for the tests below."""
    from tests.conftest import run_dirs

    dirs = run_dirs(sweep[0], "cands")
    return dirs, rank_sweep(dirs, n_boot=50)


def _oracle(run_dirs: list[Path]) -> dict[str, dict]:
    """Per candidate (its model): the echo rate of its candidate side, Wilson's interval,
    and its flags by recorded record id, from records.parquet and judgments/*.parquet."""
    from statsmodels.stats.proportion import proportion_confint

    out = {}
    for run_dir in run_dirs:
        records = pq.read_table(run_dir / "records.parquet").to_pylist()
        judgments = pq.read_table(run_dir / "judgments").to_pylist()
        cands = {r["record_id"]: r for r in records
                 if r["side"] == "candidate" and r["excluded_by"] is None}
        flags = {j["record_id"].removesuffix("::candidate"): float(not j["passed"])
                 for j in judgments if j["record_id"] in cands and j["judge"] == "prompt_echo"
                 and j["status"] == "ok"}
        k, n = int(sum(flags.values())), len(flags)
        low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
        model = next(iter(cands.values()))["model"].removeprefix("openai/")
        out[model] = {"run_id": run_dir.name, "value": k / n, "ci": (low, high), "flags": flags}
    return out


@pytest.mark.e2e
def test_a_sweep_over_candidates_ranks_them_with_intervals_and_paired_tests(
        sweep: tuple[Path, str], ranked: tuple[list[Path], Any]) -> None:
    from scipy.stats import binomtest
    from statsmodels.stats.multitest import multipletests

    _, stdout = sweep
    dirs, ranking = ranked
    assert len(dirs) == 3
    truth = _oracle(dirs)
    assert {m: round(t["value"], 3) for m, t in truth.items()} == \
        {"cand-a": 0.05, "cand-b": 0.5, "cand-c": 0.55}

    assert ranking is not None and ranking.side == "candidate"
    assert ranking.metric == "echo_rate" and ranking.higher_is_better is False
    by_run = {t["run_id"]: m for m, t in truth.items()}
    assert [by_run[r.run_id] for r in ranking.runs] == ["cand-a", "cand-b", "cand-c"]
    for r in ranking.runs:
        t = truth[by_run[r.run_id]]
        assert r.value == pytest.approx(t["value"])
        assert (r.ci_low, r.ci_high) == pytest.approx(t["ci"])
    # McNemar's exact test per pair (scipy's binomial test on the records that flipped),
    # Holm over the three pairs (statsmodels)
    ps = []
    for pair in ranking.pairs:
        fa, fb = truth[by_run[pair["a"]]]["flags"], truth[by_run[pair["b"]]]["flags"]
        up = sum(1 for i in fa if fb[i] > fa[i])
        down = sum(1 for i in fa if fb[i] < fa[i])
        ps.append(binomtest(up, up + down, 0.5).pvalue)
        assert pair["delta"] == pytest.approx((sum(fb.values()) - sum(fa.values())) / len(fa))
    reject, adjusted, *_ = multipletests(ps, alpha=0.05, method="holm")
    assert [p["p_value"] for p in ranking.pairs] == pytest.approx(ps)
    assert [p["p_adjusted"] for p in ranking.pairs] == pytest.approx(list(adjusted))
    assert [p["significant"] for p in ranking.pairs] == list(reject) == [True, True, False]
    # a is better than both; b and c cannot be told apart: ranks 1, 2–3, 2–3
    assert [r.rank for r in ranking.runs] == ["1", "2–3", "2–3"]
    assert "worse than #1" in ranking.versus_first(ranking.runs[1])

    # the closing table: best first, the rank and the interval, within 80 columns
    lines = stdout.splitlines()
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert table and all(len(ln) <= 80 for ln in table), stdout
    body = [ln for ln in table if ln.startswith("│")]
    assert [re.search(r"(cand-\w)", ln).group(1) for ln in body] == \
        ["cand-a", "cand-b", "cand-c"], stdout
    assert [ln.split("│")[1].strip() for ln in body] == ["1", "2–3", "2–3"]
    low, high = truth["cand-a"]["ci"]
    assert f"0.05 [{low:.3g}, {high:.3g}]" in body[0], stdout
    assert "ranked by echo_rate, candidate side (lower is better)" in " ".join(
        ln.strip() for ln in lines), stdout
    jobs = [ln for ln in lines if re.match(r"job \d: run ", ln)]
    assert len(jobs) == 3 and len(lines) <= len(jobs) + len(table) + 5, stdout


@pytest.mark.e2e
def test_the_report_page_ranks_the_candidates(ranked: tuple[list[Path], Any]) -> None:
    from evalkit.report._ranking import ranking_section

    _, ranking = ranked
    assert ranking is not None
    config = {r.run_id: json.loads((r.run_dir / "manifest.json").read_text())["config"]
              for r in ranking.runs}
    labels = {run_id: f"model={c['generate']['model']}" for run_id, c in config.items()}
    html = ranking_section(ranking, labels)
    rows = re.findall(r"<tr><td class='num'>(\d)</td><td><b>([^<]+)</b></td><td>([^<]+)</td>",
                      html)
    assert rows == [("1", "1", "model=openai/cand-a"), ("2", "2–3", "model=openai/cand-b"),
                    ("3", "2–3", "model=openai/cand-c")]
    assert "not distinguishable" in html and "Holm" in html
    from evalkit.report._ranking import ranking_markdown

    lines = [ln for ln in ranking_markdown(ranking, labels).splitlines() if "model=" in ln]
    assert [ln.split("|")[1:3] for ln in lines] == [
        [" 1 ", " model=openai/cand-a "], [" 2–3 ", " model=openai/cand-b "],
        [" 2–3 ", " model=openai/cand-c "]]


@pytest.mark.e2e
def test_the_closing_table_shows_the_ranking_the_sweep_page_computed(
        ranked: tuple[list[Path], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``runner.report=true`` the sweep's page ranks the runs first; the closing table
    (later, in the same process) shows that ranking instead of ranking them again."""
    import shutil

    from evalkit.report import _sweep
    from evalkit.runner import sweep as sweep_module

    dirs = [Path(shutil.copytree(d, tmp_path / "runs" / d.name)) for d in ranked[0]]
    listed = tmp_path / "listed.txt"
    listed.write_text("".join(f"{k}\t{d}\n" for k, d in enumerate(dirs)))
    monkeypatch.setenv(_sweep.ENV, str(listed))
    _sweep.SweepReport().on_multirun_end({"runner": {"report_n_boot": 10}})
    page = (tmp_path / "runs" / f"sweep-{dirs[0].name}" / "report.md").read_text()
    calls: list[Any] = []
    monkeypatch.setattr("evalkit.comparison.ranking.rank_sweep",
                        lambda *a, **k: calls.append(a))
    ranking, why = sweep_module._ranking([{"status": "ok", "run_dir": str(d)} for d in dirs])
    assert calls == [] and why is None
    assert [(r.run_dir, r.rank) for r in ranking.runs] == \
        [(tmp_path / "runs" / r.run_dir.name, r.rank) for r in ranked[1].runs]
    assert ranking.caption() in page
    # taken once: a later sweep in the same process ranks its own runs
    assert sweep_module._ranking([{"status": "ok", "run_dir": str(d)} for d in dirs]) == \
        (None, None) and len(calls) == 1


def test_the_default_metric_is_the_first_alerts_else_the_first_rate() -> None:
    metrics = {"lat": {"plugin": "latency"}, "echo_rate": {"plugin": "rate"},
               "refusal_rate": {"plugin": "rate"}}
    assert default_metric({"metrics": metrics}) == ("echo_rate", "the first rate metric")
    assert default_metric({"metrics": metrics, "alerts": [{"metric": "lat.p95"}]}) == \
        ("lat.p95", "the first alert's metric")
    assert default_metric({"metrics": {"lat": {"plugin": "latency"}}})[0] is None
