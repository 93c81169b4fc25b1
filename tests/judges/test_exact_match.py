import pytest

from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.exact_match import ExactMatchConfig, ExactMatchJudge
from evalkit.results.schemas import RECORDS, conform


def judge(pairs, **cfg):
    table = conform([{"record_id": f"r{i}", "output": o, "reference": r}
                     for i, (o, r) in enumerate(pairs)], RECORDS)
    return ExactMatchJudge("x", ExactMatchConfig(**cfg), None).judge(table).to_pylist()


def test_text_normalisation():
    pairs = [(" Paris \n", "Paris"), ("paris", "Paris"), ("New  York", "New York"),
             ("Zürich", "Zürich")]
    assert [r["passed"] for r in judge(pairs)] == [True, False, False, True]
    assert [r["passed"] for r in judge(pairs, ignore_case=True, collapse_whitespace=True)] == \
        [True, True, True, True]
    assert [r["passed"] for r in judge(pairs, strip=False)][0] is False


def test_json_comparison():
    pairs = [('```json\n{"b": 1, "a": [1, 2]}\n```', '{"a": [1, 2], "b": 1}'),
             ('{"a": 1}', '{"a": 2}'), ("not json", '{"a": 1}')]
    rows = judge(pairs, json=True)
    assert [r["value"] for r in rows] == [1.0, 0.0, None]
    assert rows[2]["status"] == "error" and rows[2]["error"] == "output is not JSON"


def test_null_sides_are_errors():
    rows = judge([(None, "x"), ("x", None)])
    assert [r["status"] for r in rows] == ["error", "error"]
    assert [r["error"] for r in rows] == ["output is null", "reference is null"]


def test_bad_column():
    with pytest.raises(ConfigError, match="reference_column"):
        instance("judges", "x", {"plugin": "exact_match", "reference_column": "tags"},
                 "judges.x")
