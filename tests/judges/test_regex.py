import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.regex import RegexConfig, RegexJudge
from evalkit.results.schemas import RECORDS, conform


def judge(outputs, **cfg):
    table = conform([{"record_id": f"r{i}", "output": o} for i, o in enumerate(outputs)],
                    RECORDS)
    return RegexJudge("r", RegexConfig(**cfg), None).judge(table).to_pylist()


def test_search_fullmatch_and_expect():
    outs = ["Answer: 42", "42", "ÄNSWER: 7\nmore", None]
    rows = judge(outs, pattern=r"\d+")
    assert [r["value"] for r in rows] == [1.0, 1.0, 1.0, None]
    assert rows[3]["status"] == "error"
    assert [r["passed"] for r in judge(outs, pattern=r"\d+", mode="fullmatch")][:3] == \
        [False, True, False]
    assert [r["passed"] for r in judge(outs, pattern="änswer", ignore_case=True)][:3] == \
        [False, False, True]
    assert [r["label"] for r in judge(outs, pattern="I'm sorry", expect=False)][:2] == \
        ["clean", "clean"]
    assert judge(outs, pattern="I'm sorry", expect=False)[0]["passed"] is True


def test_fullmatch_spans_lines():
    assert judge(["a\nb"], pattern="a.b", mode="fullmatch")[0]["value"] == 1.0


@pytest.mark.parametrize("cfg, message", [
    ({"pattern": "(?<=x)y"}, "RE2"),
    ({"pattern": "x", "mode": "match"}, "mode"),
    ({"pattern": "x", "column": "latency_s"}, "not a text record column"),
])
def test_bad_config(cfg, message):
    with pytest.raises(ConfigError, match=message):
        instance("judges", "r", {"plugin": "regex", **cfg}, "judges.r")
