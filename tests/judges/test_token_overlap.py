"""token_overlap: unsupported share by hand, n-grams, stopwords, and records it cannot
score."""

from __future__ import annotations

import pyarrow as pa
import pytest

from evalkit.judges.token_overlap import TokenOverlapConfig, TokenOverlapJudge, unsupported_share


def test_unsupported_share_by_hand():
    grounding = "The Eiffel Tower is in Paris."
    # content words: eiffel tower paris berlin -> berlin is unsupported
    assert unsupported_share("The Eiffel Tower is in Berlin, Paris", grounding) == 0.25
    assert unsupported_share("Eiffel tower, Paris!", grounding) == 0.0
    assert unsupported_share("the of and", grounding) is None  # only function words
    assert unsupported_share("the of", grounding, stopwords=False) == 0.5  # "the" is there
    # phrases are built after function words are dropped ...
    assert unsupported_share("Eiffel Tower Paris", grounding, ngram=3) == 0.0
    # ... or over every word: "eiffel tower paris" is then no 3-gram of the grounding
    assert unsupported_share("Eiffel Tower Paris", grounding, ngram=3, stopwords=False) == 1.0
    # bigrams eiffel tower / tower in / in paris: "tower in" is not in the grounding
    assert unsupported_share("Eiffel Tower in Paris", grounding, ngram=2,
                             stopwords=False) == pytest.approx(1 / 3)


def test_judge_rows_and_unscorable_records():
    batch = pa.table({
        "record_id": ["grounded", "invented", "nothing", "empty"],
        "output": ["Paris hosts the tower.", "Berlin hosts Olympics.", "Paris", "the"],
        "context": [["The tower stands in Paris; Paris hosts it."], ["The tower is in Paris."],
                    None, ["Paris"]],
        "input": ["where?", "where?", None, "q"],
    })
    cfg = TokenOverlapConfig(threshold=0.5)
    cfg.validate()
    rows = {r["record_id"]: r for r in TokenOverlapJudge("t", cfg, None).judge(batch)}
    assert rows["grounded"]["value"] == 0.0 and rows["grounded"]["passed"] is True
    assert rows["invented"]["value"] == 1.0 and rows["invented"]["label"] == "unsupported"
    assert rows["nothing"]["status"] == "error" and "nothing to check" in rows["nothing"]["error"]
    assert rows["empty"]["status"] == "error" and "no content words" in rows["empty"]["error"]


@pytest.mark.parametrize("kw,msg", [({"ngram": 0}, "ngram"), ({"threshold": 2}, "threshold"),
                                    ({"against": []}, "against"),
                                    ({"against": ["knowledge"]}, "not record columns")])
def test_config_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        TokenOverlapConfig(**kw).validate()
