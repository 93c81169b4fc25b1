import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.contains import ContainsConfig, ContainsJudge
from evalkit.results.schemas import RECORDS, conform


def judge(rows, **cfg):
    table = conform([{"record_id": f"r{i}", **r} for i, r in enumerate(rows)], RECORDS)
    return ContainsJudge("c", ContainsConfig(**cfg), None).judge(table).to_pylist()


def test_any_all_and_share():
    rows = [{"output": "Paris and Lyon"}, {"output": "only paris"}, {"output": "neither"}]
    any_ = judge(rows, values=["Paris", "Lyon"])
    assert [r["value"] for r in any_] == [1.0, 0.0, 0.0]
    assert [r["passed"] for r in any_] == [True, False, False]
    ci = judge(rows, values=["Paris", "Lyon"], mode="all", ignore_case=True)
    assert [r["value"] for r in ci] == [1.0, 0.5, 0.0]
    assert [r["passed"] for r in ci] == [True, False, False]


def test_forbidden_text_and_unicode():
    rows = judge([{"output": "Je suis désolé"}, {"output": "Voilà"}],
                 values=["désolé"], expect=False)
    assert [r["passed"] for r in rows] == [False, True]
    # the labels read as the verdict: a passing record is "clean", never "missing"
    assert [r["label"] for r in rows] == ["forbidden", "clean"]
    both = judge([{"output": "Je suis désolé"}, {"output": "Voilà"}], values=["désolé"])
    assert [r["label"] for r in both] == ["contains", "missing"]


def test_reference_column_and_nulls():
    rows = judge([{"output": "The answer is 1889.", "reference": "1889"},
                  {"output": "No idea", "reference": "1889"},
                  {"output": "No reference", "reference": None},
                  {"output": None, "reference": "x"}], reference_column="reference")
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "error"]
    assert [r["value"] for r in rows] == [1.0, 0.0, None, None]
    assert rows[2]["error"] == "reference is null: nothing to look for"
    assert rows[3]["error"] == "output is null"


def test_bad_config():
    with pytest.raises(ConfigError, match="set values"):
        instance("judges", "c", {"plugin": "contains"}, "judges.c")
    with pytest.raises(ConfigError, match="mode"):
        instance("judges", "c", {"plugin": "contains", "values": ["a"], "mode": "most"},
                 "judges.c")
