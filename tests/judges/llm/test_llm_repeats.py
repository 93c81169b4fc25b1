"""``runner.repeats`` with an LLM judge: each repeat is its own call and its own cache
entry (a cached first answer never stands in for a repeat), a rerun serves every repeat from
the cache, and a dry run prices every repeat."""

from __future__ import annotations

import pyarrow as pa
from llm_helpers import make, records

from evalkit.config import PluginInstance
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from evalkit.runner.judging import JudgeRunner


def _runner(judge, repeats: int, dry_run: bool = False) -> JudgeRunner:
    inst = PluginInstance("judges", "j", "hallucination", HallucinationLlmJudge, judge.config)
    return JudgeRunner([(inst, judge)], "run", dry_run, {"j": repeats})


def _table() -> pa.Table:
    return records(*({"input": f"q{i}", "output": f"a{i}", "context": [f"c{i}"]}
                     for i in range(4)))


def test_each_repeat_is_a_call_of_its_own_then_a_cache_entry_of_its_own(fake_llm, ctx):
    judge = make(HallucinationLlmJudge, ctx, fake_llm)
    parts = _runner(judge, 3).run(_table())
    assert len(fake_llm.requests) == 4 * 3
    repeats = sorted({r for p in parts for r in p.column("repeat").to_pylist()})
    assert repeats == [0, 1, 2]
    assert all(o == "computed" for p in parts for o in p.column("origin").to_pylist())
    again = _runner(make(HallucinationLlmJudge, ctx, fake_llm), 3).run(_table())
    assert len(fake_llm.requests) == 12  # all three repeats from the cache
    assert {o for p in again for o in p.column("origin").to_pylist()} == {"cache"}


def test_a_dry_run_prices_every_repeat(fake_llm, ctx):
    runner = _runner(make(HallucinationLlmJudge, ctx, fake_llm), 3, dry_run=True)
    runner.run(_table())
    once = _runner(make(HallucinationLlmJudge, ctx, fake_llm), 1, dry_run=True)
    once.run(_table())
    assert runner.estimates["j"]["calls"] == 3 * once.estimates["j"]["calls"] > 0
    assert not fake_llm.requests


def test_every_judgment_says_what_produced_it(fake_llm, ctx):
    import json

    from evalkit.judges.llm.geval import GEvalJudge

    parts = _runner(make(HallucinationLlmJudge, ctx, fake_llm), 1).run(_table())
    [produced] = {p for part in parts for p in part.column("produced_by").to_pylist()}
    info = json.loads(produced)
    assert info["model"] == "openai/fake-judge" and info["evalkit"]
    assert info["plugin"].startswith("evalkit==") and len(info["prompt_sha256"]) == 16
    # the prompt's digest follows the prompt, not the endpoint or the concurrency
    a = make(GEvalJudge, ctx, fake_llm, criteria="Is it correct?", steps=["Check it."])
    b = make(GEvalJudge, ctx, fake_llm, criteria="Is it polite?", steps=["Check it."])
    c = make(GEvalJudge, ctx, fake_llm, criteria="Is it correct?", steps=["Check it."],
             concurrency=2)
    assert a.prompt_fingerprint() != b.prompt_fingerprint()
    assert a.prompt_fingerprint() == c.prompt_fingerprint()


def test_the_config_digest_follows_what_is_asked_not_where_or_how_fast(fake_llm, ctx):
    """A new endpoint port, concurrency or timeout is not a judge change (a resume against a
    restarted server matches a clean run); a new temperature or criteria is."""
    import json

    from evalkit.judges.llm.geval import GEvalJudge
    from evalkit.runner.judging import provenance

    def digest(**options) -> str:
        judge = make(GEvalJudge, ctx, fake_llm, criteria="Is it correct?", **options)
        inst = PluginInstance("judges", "j", "geval", GEvalJudge, judge.config)
        return json.loads(provenance(inst, judge))["config_sha256"]

    same = digest()
    assert digest(api_base="http://127.0.0.1:1/v1", concurrency=2, timeout_s=5.0,
                  rpm=60, max_retries=0, cache=False, progress=False) == same
    assert digest(temperature=0.5) != same
    assert digest(max_tokens=10) != same
