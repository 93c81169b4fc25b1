"""citation_precision: the deterministic id check, and support read from a judge."""

from __future__ import annotations

import json

import pytest

from evalkit.analysis.citations import Citation, extract_citations
from evalkit.metrics.citation_precision import CitationPrecisionConfig, CitationPrecisionMetric
from tests.metrics.run_tables import by_metric, connect

CONTEXT = ["Paris is the capital of France.", "The Seine flows through Paris."]
RECORDS = [
    {"record_id": "a", "output": "Paris is France's capital [1]. The Seine runs there [2].",
     "context": CONTEXT},
    {"record_id": "b", "output": "Lyon is the capital [3].", "context": CONTEXT},
    {"record_id": "c", "output": "No citations here.", "context": CONTEXT},
    {"record_id": "d", "output": "Both say so [1, 2].", "context": CONTEXT},
]


def run(records, judgments=(), **kw):
    cfg = CitationPrecisionConfig(**{"n_boot": 0, **kw})
    cfg.validate()
    return by_metric(CitationPrecisionMetric("cite", cfg, None).compute(
        connect(records, judgments)))


def test_extract_citations_with_claims():
    got = extract_citations("A holds [1]. B and C [2; 3]! No cite.")
    assert got == [Citation("1", "A holds ."), Citation("2", "B and C !"),
                   Citation("3", "B and C !")]


def test_id_level_check_is_deterministic_and_main_value_needs_a_judge():
    rows = run(RECORDS)
    idv = rows["cite.id_valid"]
    assert idv["value"] == pytest.approx(4 / 5)  # [3] names no passage
    assert idv["n_judged"] == 3 and idv["details"]["n_records_without_citations"] == 1
    assert rows["cite"]["value"] is None
    assert "support_judge" in rows["cite"]["details"]["undefined"]


def test_support_from_judge_details():
    verdicts = [{"record_id": "a", "judge": "sup", "details": json.dumps(
        {"citations": [{"id": "1", "supported": True}, {"id": "2", "supported": False}]})},
        {"record_id": "d", "judge": "sup", "details": json.dumps(
            {"citations": [{"id": "1", "supported": True}, {"id": "2", "supported": True}]})}]
    row = run(RECORDS, verdicts, support_judge="sup")["cite"]
    # a: 1 of 2; b: the invalid [3] is unsupported without asking the judge; d: 2 of 2
    assert row["value"] == pytest.approx(3 / 5)
    assert row["n_judged"] == 3 and row["n_unscored"] == 0


def test_support_from_a_judge_value_and_judge_errors():
    judgments = [{"record_id": "a", "judge": "sup", "value": 0.5},
                 {"record_id": "d", "judge": "sup", "status": "error", "error": "timeout"}]
    row = run(RECORDS, judgments, support_judge="sup")["cite"]
    assert row["value"] == pytest.approx((1 + 0) / 3)  # a: .5 × 2 valid; b: 0 of 1
    assert row["n_unscored"] == 1  # d: its judge failed


def test_ids_from_metadata_and_bad_metadata():
    records = [{"record_id": "a", "output": "See [doc7] and [doc9].", "context": CONTEXT,
                "metadata": json.dumps({"ids": ["doc7", "doc8"]})},
               {"record_id": "b", "output": "See [doc7].", "context": CONTEXT,
                "metadata": json.dumps({"ids": "doc7"})},
               # metadata that is not JSON: that record's ids are unknown, not a crash
               {"record_id": "c", "output": "See [doc7].", "context": CONTEXT,
                "metadata": "{ids: doc7"}]
    rows = run(records[:2], ids="metadata.ids")
    assert rows["cite.id_valid"]["value"] == 0.5
    assert rows["cite.id_valid"]["details"]["n_records_ids_unknown"] == 1
    rows = run(records, ids="metadata.ids")
    assert rows["cite.id_valid"]["details"]["n_records_ids_unknown"] == 2


def test_empty_and_no_citations():
    assert run([])["cite.id_valid"]["value"] is None
    rows = run([{"record_id": "x", "output": "plain", "context": CONTEXT}],
               support_judge="sup")
    assert rows["cite"]["value"] is None and rows["cite.id_valid"]["value"] is None


@pytest.mark.parametrize("kw,msg", [({"pattern": "["}, "regex"), ({"pattern": "x"}, "group"),
                                    ({"ids": "order"}, "ids")])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        CitationPrecisionConfig(**kw).validate()
